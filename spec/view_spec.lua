-- Views (tocha.view): narrow, select, transpose, permute, squeeze, unsqueeze, expand, view,
-- reshape and t[{...}] against references computed here from indices alone (never from
-- strides), on random shapes; views of views; contiguous() (the strided copy kernel) bit for
-- bit in every dtype; writes through views (fill, copy, t[spec] = v) with every other element
-- checked untouched; the memory a view holds; views refused by kernels with their name; views
-- across devices; views saved to files and printed. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local numel = ref.numel
local files = require "support.files"

-- Every multi-index of shape, row-major.
local function indices(shape)
  local out, idx = {}, {}
  for i = 1, #shape do idx[i] = 1 end
  for _ = 1, numel(shape) do
    local copy = {}
    for i = 1, #idx do copy[i] = idx[i] end
    out[#out + 1] = copy
    for k = #shape, 1, -1 do
      idx[k] = idx[k] + 1
      if idx[k] <= shape[k] then break end
      idx[k] = 1
    end
  end
  return out
end

-- The row-major position (1-based) of idx in shape.
local function flat(shape, idx)
  local p = 0
  for k = 1, #shape do p = p * shape[k] + (idx[k] - 1) end
  return p + 1
end

-- Checks that view v holds, at each of its indices, x's element at source(idx).
local function check_view(x, v, want_shape, source)
  assert.are.same(want_shape, v:shape())
  local xs, vs = x:to_table(true), v:to_table(true)
  local xshape = x:shape()
  for k, idx in ipairs(indices(want_shape)) do
    local want = xs[flat(xshape, source(idx))]
    assert(vs[k] == want, ("element %s: %s, expected %s"):format(table.concat(idx, ","), tostring(vs[k]), tostring(want)))
  end
end

describe("tensor views", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      ref.rng("views")
      local rng = math.random

      local function random_tensor(shape, dt, seed)
        return tocha.rand(shape, { dtype = dt or "f32", device = device, seed = seed, low = -100, high = 100 })
      end

      it("narrow, select, transpose and permute see the elements their indices name", function()
        for round = 1, 12 do
          local shape = ref.random_shape(4, 6)
          if #shape < 2 then shape[2] = 3 end
          local x = random_tensor(shape, "f32", round)
          local nd = #shape
          local d = rng(1, nd)
          local start = rng(1, shape[d])
          local len = rng(1, shape[d] - start + 1)
          local want = {}
          for i, s in ipairs(shape) do want[i] = s end
          want[d] = len
          check_view(x, x:narrow(d, start, len), want, function(idx)
            local src = { unpack(idx) }
            src[d] = idx[d] + start - 1
            return src
          end)
          local at = rng(1, shape[d])
          local sel = {}
          for i, s in ipairs(shape) do if i ~= d then sel[#sel + 1] = s end end
          check_view(x, x:select(d, at), sel, function(idx)
            local src = { unpack(idx) }
            table.insert(src, d, at)
            return src
          end)
          local a, b = rng(1, nd), rng(1, nd)
          local tshape = { unpack(shape) }
          tshape[a], tshape[b] = shape[b], shape[a]
          check_view(x, x:transpose(a, b), tshape, function(idx)
            local src = { unpack(idx) }
            src[a], src[b] = idx[b], idx[a]
            return src
          end)
          -- a random permutation, then narrowed again: a view of a view
          local perm = {}
          for i = 1, nd do perm[i] = i end
          for i = nd, 2, -1 do
            local j = rng(1, i)
            perm[i], perm[j] = perm[j], perm[i]
          end
          local p = x:permute(perm)
          local pshape = {}
          for i = 1, nd do pshape[i] = shape[perm[i]] end
          local from = function(idx)
            local src = {}
            for i = 1, nd do src[perm[i]] = idx[i] end
            return src
          end
          check_view(x, p, pshape, from)
          local pn = p:narrow(1, pshape[1], 1)
          local pnshape = { unpack(pshape) }
          pnshape[1] = 1
          check_view(x, pn, pnshape, function(idx)
            local i2 = { unpack(idx) }
            i2[1] = pshape[1]
            return from(i2)
          end)
        end
      end)

      it("view, reshape, squeeze, unsqueeze, expand and t[{...}] shape what they are given", function()
        local x = random_tensor({ 2, 1, 3, 4 }, "f32", 40)
        check_view(x, x:view(6, -1), { 6, 4 }, function(idx)
          local e = (idx[1] - 1) * 4 + idx[2]
          local i4 = (e - 1) % 4 + 1
          local i3 = math.floor((e - 1) / 4) % 3 + 1
          local i1 = math.floor((e - 1) / 12) + 1
          return { i1, 1, i3, i4 }
        end)
        check_view(x, x:squeeze(), { 2, 3, 4 }, function(idx) return { idx[1], 1, idx[2], idx[3] } end)
        check_view(x, x:squeeze(2):unsqueeze(-1), { 2, 3, 4, 1 }, function(idx) return { idx[1], 1, idx[2], idx[3] } end)
        check_view(x, x:expand(5, 2, 3, 3, 4), { 5, 2, 3, 3, 4 }, function(idx) return { idx[2], 1, idx[4], idx[5] } end)
        check_view(x, x[{ 2, {}, { 2, 3 }, -1 }], { 1, 2 }, function(idx) return { 2, 1, idx[2] + 1, 4 } end)
        check_view(x, x[{ { 1 }, 1, 3 }], { 1, 4 }, function(idx) return { 1, 1, 3, idx[2] } end)
        local t = x:transpose(3, 4)
        assert.is_false(t:is_contiguous())
        local r = t:reshape(2, 12)
        assert.is_true(r:is_contiguous())
        check_view(x, r, { 2, 12 }, function(idx)
          local i3, i4 = (idx[2] - 1) % 3 + 1, math.floor((idx[2] - 1) / 3) + 1
          return { idx[1], 1, i3, i4 }
        end)
        assert.are.same({ 12, 12, 4, 1 }, x:stride())
        assert.are.same({ 12, 12, 1, 4 }, t:stride())
        assert.are.equal(0, x:expand(2, 7, 3, 4):stride(2))
      end)

      it("make dense copies bit for bit in every dtype (contiguous), and leave dense tensors as they are", function()
        for k, dt in ipairs(ref.all_dtypes) do
          local lo, hi = -1000, 1000
          if dt == "u8" then lo, hi = 0, 256 end
          local x = tocha.rand({ 3, 5, 7, 2 }, { dtype = dt, device = device, seed = k, low = lo, high = hi })
          assert.are.equal(x, x:contiguous())
          local v = x:permute(4, 2, 1, 3):narrow(3, 2, 2)
          local c = v:contiguous()
          assert.is_true(c:is_contiguous())
          check_view(x, c, { 2, 5, 2, 7 }, function(idx) return { idx[3] + 1, idx[2], idx[4], idx[1] } end)
          assert.are.equal(files.bytes_of(v), files.bytes_of(c))
        end
      end)

      it("copy through each mapping of the copy kernel: whole 16-, 8- and 4-byte runs, tiles, elements", function()
        -- Shapes whose merged dimensions take each plan of the strided copy: runs along a
        -- dense last dimension moved in the widest aligned unit (narrow starts of 0, 1 and 2
        -- elements shift the alignment), 64 x 64 tiles where each side is dense along a
        -- different dimension (ragged edges, batch dimensions around them, into a transposed
        -- destination too), and one element at a time.
        local cases = {
          { { 3, 5, 40, 12 }, function(x) return x:narrow(3, 9, 24) end, function(i) return { i[1], i[2], i[3] + 8, i[4] } end },
          { { 3, 5, 40, 12 }, function(x) return x:narrow(3, 2, 24) end, function(i) return { i[1], i[2], i[3] + 1, i[4] } end },
          { { 4, 6, 19 }, function(x) return x:narrow(3, 2, 16) end, function(i) return { i[1], i[2], i[3] + 1 } end },
          { { 4, 6, 19 }, function(x) return x:narrow(3, 3, 16) end, function(i) return { i[1], i[2], i[3] + 2 } end },
          { { 2, 37, 3, 45 }, function(x) return x:permute(1, 3, 4, 2) end, function(i) return { i[1], i[4], i[2], i[3] } end },
          { { 70, 33 }, function(x) return x:t() end, function(i) return { i[2], i[1] } end },
          { { 3, 17, 50 }, function(x) return x:transpose(2, 3):narrow(1, 2, 2) end, function(i) return { i[1] + 1, i[3], i[2] } end },
          { { 5, 6, 7 }, function(x) return x:permute(3, 1, 2) end, function(i) return { i[2], i[3], i[1] } end },
          -- seven dimensions none of which merge, sizes 2 to 7: a division of each a unit
          { { 2, 3, 5, 7, 3, 2, 3 }, function(x) return x:permute(7, 1, 6, 2, 5, 3, 4) end,
            function(i) return { i[2], i[4], i[6], i[7], i[5], i[3], i[1] } end },
          { { 3, 1, 6 }, function(x) return x:expand(3, 5, 6):transpose(1, 3) end, function(i) return { i[3], 1, i[1] } end },
        }
        for k, dt in ipairs({ "f32", "bf16", "f64", "u8", "i32" }) do
          local lo, hi = -1000, 1000
          if dt == "u8" then lo, hi = 0, 256 end
          for c, case in ipairs(cases) do
            local shape, make, source = case[1], case[2], case[3]
            local x = tocha.rand(shape, { dtype = dt, device = device, seed = 100 * k + c, low = lo, high = hi })
            local v = make(x)
            local c1 = v:contiguous()
            check_view(x, c1, v:shape(), source)
            -- into a destination laid out transposed: the same elements through its strides
            local vs = v:shape()
            local n = #vs
            local perm = {}
            for i = 1, n do perm[i] = i end
            perm[n - 1], perm[n] = n, n - 1
            local back = {}
            for i = 1, n do back[i] = vs[perm[i]] end
            local dst = tocha.full(back, 3, { dtype = dt, device = device }):permute(table.unpack(perm))
            dst:copy(v)
            check_view(x, dst:contiguous(), vs, source)
          end
        end
      end)

      it("write through views, and leave every other element as it was", function()
        local x = random_tensor({ 4, 5, 6 }, "f32", 50)
        local before = x:to_table(true)
        x:narrow(2, 2, 3):transpose(1, 3):fill(7)
        local src = random_tensor({ 6, 2 }, "f32", 51)
        x[{ 3, { 4, 5 } }] = src:transpose(1, 2)
        local after, s = x:to_table(true), src:to_table(true)
        for _, idx in ipairs(indices({ 4, 5, 6 })) do
          local e = flat({ 4, 5, 6 }, idx)
          local want = before[e]
          if idx[2] >= 2 and idx[2] <= 4 then want = 7 end
          if idx[1] == 3 and idx[2] >= 4 and idx[2] <= 5 then want = s[flat({ 6, 2 }, { idx[3], idx[2] - 3 })] end
          assert(after[e] == want, ("element %s: %s, expected %s"):format(table.concat(idx, ","), after[e], want))
        end
        x[{ 1 }] = 0
        assert.are.same(tocha.zeros({ 5, 6 }, { device = device }):to_table(), x[{ 1 }]:to_table())
        local ok, err = pcall(function() x:narrow(1, 1, 1):expand(3, 5, 6):fill(1) end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("expanded view (stride 0 along dimension 1)", 1, true), tostring(err))
        -- casts, random fills and copies between dtypes through views
        local h = x:transpose(1, 2):cast("f16")
        assert.are.same(x:transpose(1, 2):contiguous():cast("f16"):to_table(true), h:to_table(true))
        local target = tocha.zeros({ 6, 5 }, { dtype = "f64", device = device })
        x:select(1, 2):cast_into(target:transpose(1, 2))
        assert.are.same(x:select(1, 2):to_table(true), target:transpose(1, 2):to_table(true))
        local g = tocha.zeros({ 8, 8 }, { device = device })
        g:narrow(2, 3, 4):uniform(5, 1, 2)
        for i, v in ipairs(g:to_table(true)) do
          local col = (i - 1) % 8 + 1
          if col >= 3 and col <= 6 then assert(v >= 1 and v < 2, v) else assert.are.equal(0, v) end
        end
      end)

      it("keep their memory while any of them lives, and give it back after the last", function()
        collectgarbage("collect")
        local start = tocha.memory.stats(device).allocated
        local x = tocha.zeros({ 1024, 256 }, { device = device })
        local v = x:narrow(1, 10, 4):fill(3)
        x:free()
        assert.is_true(x:is_freed())
        assert.are.same({ 3, 3, 3 }, { v:to_table(true)[1], v:to_table(true)[500], v:to_table(true)[1024] })
        assert.are.equal(start + 1024 * 256 * 4, tocha.memory.stats(device).allocated)
        v:free()
        assert.are.equal(start, tocha.memory.stats(device).allocated)
        local w = tocha.ones({ 64, 64 }, { device = device }):transpose(1, 2):select(1, 3)
        collectgarbage("collect")
        assert.are.same(tocha.ones({ 64 }, { device = device }):to_table(true), w:to_table(true))
        w = nil -- luacheck: ignore
        collectgarbage("collect")
        collectgarbage("collect")
        assert.are.equal(start, tocha.memory.stats(device).allocated)
      end)

      it("are refused by kernels and ops by name, and taken by comparisons, files and printing", function()
        local x = random_tensor({ 3, 4, 5 }, "f32", 60)
        local t = x:transpose(2, 3)
        local function fails(pattern, fn)
          local ok, err = pcall(fn)
          assert.is_false(ok)
          assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
        end
        fails("tocha.Elementwise:forward: x: not contiguous (a view): call :contiguous() on it first",
          function() tocha.Elementwise.new("relu"):forward(t) end)
        fails("tocha.Reduce:forward: x: not contiguous (a view)", function() tocha.Reduce.new("sum"):forward(t) end)
        local k = tocha.kernel { source = "__device__ void nop(float *x) {}", name = "nop", params = "f32* x" }
        fails("argument 1 (x): not contiguous (a view): call :contiguous() on it first", function() k:launch(1, 1, t) end)
        fails("self: not contiguous (a view): call :contiguous() first, or :reshape()", function() t:view(60) end)
        assert.is_true(tocha.allclose(t, t:contiguous(), 0, 0))
        assert.tensor.equal(t:contiguous(), t)
        local path = os.tmpname()
        tocha.save(path, { t = t })
        assert.tensor.equal(t:contiguous(), tocha.load(path, { device = device }).t)
        tocha.save_npy(path, t)
        assert.tensor.equal(t:contiguous(), tocha.load_npy(path, { device = device }))
        os.remove(path)
        assert.are.equal(tostring(t:contiguous()), tostring(t))
        -- still usable after every refusal
        assert.are.same({ 3, 5, 4 }, t:shape())
      end)

      it("copy between overlapping views of one block as if the source were read first", function()
        local cases = 0
        for round = 1, 12 do
          local n = rng(2, 6)
          local x = random_tensor({ n, n }, "f32", 900 + round)
          local before = x:to_table()
          local kind = round % 4
          if kind == 0 then -- a matrix onto its own transpose
            x:copy(x:transpose(1, 2))
            for i = 1, n do for j = 1, n do assert.are.equal(before[j][i], x:to_table()[i][j]) end end
          elseif kind == 1 then -- rows shifted down by one (dense views, one block)
            x:narrow(1, 2, n - 1):copy(x:narrow(1, 1, n - 1))
            local after = x:to_table()
            assert.are.same(before[1], after[1])
            for i = 2, n do assert.are.same(before[i - 1], after[i]) end
          elseif kind == 2 then -- columns shifted left by one (strided views)
            x:narrow(2, 1, n - 1):copy(x:narrow(2, 2, n - 1))
            local after = x:to_table()
            for i = 1, n do
              for j = 1, n - 1 do assert.are.equal(before[i][j + 1], after[i][j]) end
              assert.are.equal(before[i][n], after[i][n])
            end
          else -- a tensor onto itself: nothing changes
            x:copy(x)
            x[{ {}, { 1, n } }] = x:narrow(2, 1, n)
            assert.are.same(before, x:to_table())
          end
          cases = cases + 1
        end
        assert.are.equal(12, cases)
        local x = tocha.tensor({ { 1, 2 }, { 3, 4 } }, { device = device })
        x:copy(x:transpose(1, 2))
        assert.are.same({ { 1, 3 }, { 2, 4 } }, x:to_table())
      end)

      it("refuse bad arguments, naming them", function()
        local x = tocha.zeros({ 3, 4 }, { device = device })
        local function fails(pattern, fn)
          local ok, err = pcall(fn)
          assert.is_false(ok)
          assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
        end
        fails("tocha.Tensor:narrow: length: expected 0 to 2 (from 3 of 4), got 3", function() x:narrow(2, 3, 3) end)
        fails("tocha.Tensor:narrow: dim: expected a dimension from 1 to 2 (or -1 to -2), got 3", function() x:narrow(3, 1, 1) end)
        fails("tocha.Tensor:select: index: expected 1 to 3 (or -1 to -3), got 4", function() x:select(1, 4) end)
        fails("tocha.Tensor:view: sizes: [5, 2] holds 10 elements, the tensor 12", function() x:view(5, 2) end)
        fails("tocha.Tensor:view: sizes: 12 elements do not divide into [5, -1]", function() x:view(5, -1) end)
        fails("tocha.Tensor:permute: dims: dimension 1 appears twice", function() x:permute(1, 1) end)
        fails("tocha.Tensor:expand: sizes[2]: dimension 2 has size 4, which expands only from 1, got 5", function() x:expand(3, 5) end)
        fails("tocha.Tensor:index: spec[1]: the range 3 to 2 is empty", function() return x[{ { 3, 2 } }] end)
        fails("tocha.Tensor:index: spec: 3 entries for 2 dimensions", function() return x[{ 1, 1, 1 }] end)
        assert.are.same({ 3, 4 }, x:shape())
      end)

      if device ~= "sim" then
        it("copy between devices from and into views", function()
          local x = random_tensor({ 4, 6 }, "f32", 70)
          local on_sim = tocha.zeros({ 6, 4 }, { device = "sim" })
          on_sim:copy(x:transpose(1, 2))
          assert.are.same(x:transpose(1, 2):to_table(true), on_sim:to_table(true))
          local back = tocha.zeros({ 4, 6 }, { device = device })
          back:transpose(1, 2):copy(on_sim:narrow(1, 1, 6))
          assert.tensor.equal(x, back)
        end)
      end
    end)
  end
end)
