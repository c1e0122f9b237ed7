-- Elements picked by indices (index_select, gather), the copies built on them (flip, roll,
-- repeat_tensor), sorts (sort, argsort, topk, median) and running sums and products (cumsum,
-- cumprod). Every output element is checked
-- against a reference computed here from the inputs as stored. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local assertions = require "support.assertions"
local fails_with = assertions.fails_with

local indices_of, flat_of = ref.indices_of, ref.flat_of

-- got's elements equal want's exactly (NaN equal to NaN).
local function same(got, want, label)
  local g = got:cast("f64"):to_table(true)
  assert.are.equal(#want, #g, label .. ": element count")
  for i = 1, #want do
    if not (g[i] == want[i] or (g[i] ~= g[i] and want[i] ~= want[i])) then
      error(("%s [%d]: got %.17g, want %.17g"):format(label, i, g[i], want[i]), 2)
    end
  end
end

describe("indexing, flips, rolls, tiles and scans", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 300
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt or "f32", device = device, seed = seed })
      end
      local function ints(list, dt)
        return tocha.tensor(list, { dtype = dt or "i64", device = device })
      end

      it("selects slices by 1-based and 0-based indices along every dimension, in every dtype", function()
        ref.rng("index_select")
        for _, dt in ipairs({ "f32", "f64", "bf16", "i32", "u8" }) do
          local shape = ref.random_shape(4, 5)
          local x = randn(shape):mul(50):cast(dt)
          local dim = math.random(1, #shape)
          local m = math.random(1, 7)
          local picks = {}
          for j = 1, m do picks[j] = math.random(1, shape[dim]) end
          local base = math.random() < 0.5 and 0 or 1
          local list = {}
          for j = 1, m do list[j] = picks[j] - 1 + base end
          local y = x:index_select(dim, ints(list, base == 0 and "i32" or "i64"), { base = base })
          local ys = {}
          for k = 1, #shape do ys[k] = k == dim and m or shape[k] end
          assert.are.same(ys, y:size())
          assert.are.equal(dt, y:dtype())
          local xv, want = x:cast("f64"):to_table(true), {}
          for e = 1, ref.numel(ys) do
            local idx = indices_of(e, ys)
            idx[dim] = picks[idx[dim]]
            want[e] = xv[flat_of(idx, shape)]
          end
          same(y, want, ("index_select %s along %d"):format(dt, dim))
        end
        local x = randn({ 3, 4 })
        -- a transposed view is read through a copy
        local t = x:t():index_select(1, ints({ 2 }))
        same(t, { x:to_table()[1][2], x:to_table()[2][2], x:to_table()[3][2] }, "a view's column")
        assert.are.same({ 3, 0 }, x:index_select(2, tocha.empty({ 0 }, { dtype = "i64", device = device })):size())
        fails_with("tocha.Tensor:index_select: index: index[2] is 5, outside 1 to 4 along the dimension",
          function() x:index_select(2, ints({ 1, 5 })) end)
        fails_with("tocha.Tensor:index_select: index: index[1] is 4, outside 0 to 3 along the dimension",
          function() x:index_select(2, ints({ 4 }), { base = 0 }) end)
        fails_with("tocha.Tensor:index_select: index: expected an i64 or i32 tensor, got f32",
          function() x:index_select(2, tocha.ones({ 1 }, { device = device })) end)
        fails_with("tocha.Tensor:index_select: index: expected a 1-D tensor, got 2 dimensions",
          function() x:index_select(2, ints({ { 1 } })) end)
        fails_with("tocha.Tensor:index_select: base: expected 0 or 1, got 2", function() x:index_select(2, ints({ 1 }), { base = 2 }) end)
        -- the process goes on: the same call with good indices works
        assert.are.same({ 3, 1 }, x:index_select(2, ints({ 4 })):size())
      end)

      it("gathers an index an element, index smaller than self in other dimensions", function()
        ref.rng("gather")
        for _, dt in ipairs({ "f32", "f16", "i64" }) do
          local shape = ref.random_shape(3, 6)
          local dim = math.random(1, #shape)
          local ishape = {}
          for k = 1, #shape do ishape[k] = k == dim and math.random(1, 5) or math.random(1, shape[k]) end
          local x = randn(shape):mul(20):cast(dt)
          local list = {}
          for e = 1, ref.numel(ishape) do list[e] = math.random(1, shape[dim]) end
          local idx = tocha.tensor(list, { dtype = "i64", device = device }):view(ishape)
          local y = x:gather(dim, idx)
          assert.are.same(ishape, y:size())
          local xv, want = x:cast("f64"):to_table(true), {}
          for e = 1, #list do
            local at = indices_of(e, ishape)
            at[dim] = list[e]
            want[e] = xv[flat_of(at, shape)]
          end
          same(y, want, ("gather %s along %d of %s"):format(dt, dim, table.concat(shape, "x")))
        end
        local x = randn({ 2, 3 })
        fails_with("tocha.Tensor:gather: index: index[2, 1] is 0, outside 1 to 3 along the dimension",
          function() x:gather(2, ints({ { 1 }, { 0 } })) end)
        fails_with("tocha.Tensor:gather: index: size 3 of dimension 1 is larger than self's 2",
          function() x:gather(2, ints({ { 1 }, { 1 }, { 1 } })) end)
        fails_with("tocha.Tensor:gather: index: expected 2 dimensions (as self), got 1", function() x:gather(2, ints({ 1 })) end)
      end)

      it("flips and rolls along dimensions as PyTorch does, and tiles with repeat_tensor", function()
        local x = randn({ 2, 3, 4 })
        local xv = x:to_table(true)
        local shape = { 2, 3, 4 }
        local function moved(f)
          local want = {}
          for e = 1, 24 do
            local idx = indices_of(e, shape)
            want[e] = xv[flat_of(f(idx), shape)]
          end
          return want
        end
        same(x:flip(3), moved(function(i) return { i[1], i[2], 5 - i[3] } end), "flip 3")
        same(x:flip({ 1, -1 }), moved(function(i) return { 3 - i[1], i[2], 5 - i[3] } end), "flip 1, -1")
        -- roll: the element at i moves to i + shift, so y[i] = x[i - shift] (wrapping)
        local function wrap(v, n) return (v - 1) % n + 1 end
        same(x:roll(1, 3), moved(function(i) return { i[1], i[2], wrap(i[3] - 1, 4) } end), "roll 1 along 3")
        same(x:roll({ -2, 5 }, { 2, 3 }), moved(function(i) return { i[1], wrap(i[2] + 2, 3), wrap(i[3] - 5, 4) } end), "roll two")
        local flat = x:roll(7):to_table(true)
        for e = 1, 24 do assert.are.equal(xv[wrap(e - 7, 24)], flat[e]) end
        same(x:roll(0, 2), xv, "roll by 0 is a copy")
        fails_with("tocha.Tensor:flip: dims: dimension 3 appears twice", function() x:flip({ 3, -1 }) end)
        fails_with("tocha.Tensor:roll: shifts: expected one shift for each of the 2 dimensions, got 1",
          function() x:roll(1, { 1, 2 }) end)
        -- repeat_tensor: y[i] = x[i mod size] in each dimension, with new leading dimensions
        local small = randn({ 2, 3 })
        local sv = small:to_table(true)
        for _, reps in ipairs({ { 2, 3 }, { 3, 1, 2 }, { 1, 1 }, { 2, 0 }, { 2, 1, 1, 2, 1, 1, 2, 1 } }) do
          local y = small:repeat_tensor(reps)
          local ys = {}
          for k = 1, #reps do ys[k] = reps[k] * (k > #reps - 2 and ({ 2, 3 })[k - #reps + 2] or 1) end
          assert.are.same(ys, y:size(), "repeat " .. table.concat(reps, ","))
          local want = {}
          for e = 1, ref.numel(ys) do
            local idx = indices_of(e, ys)
            local r, c = idx[#ys - 1], idx[#ys]
            want[e] = sv[((r - 1) % 2) * 3 + (c - 1) % 3 + 1]
          end
          same(y, want, "repeat " .. table.concat(reps, ","))
        end
        fails_with("tocha.Tensor:repeat_tensor: repeats: expected at least 2 (self's dimensions), got 1",
          function() small:repeat_tensor(2) end)
      end)

      -- The reference order: values ascending (descending with desc), NaN after numbers (before
      -- them descending), equal values by position.
      local function reference_sort(values, desc)
        local order = {}
        for p = 1, #values do order[p] = p end
        table.sort(order, function(a, b)
          local x, y = values[a], values[b]
          local xn, yn = x ~= x, y ~= y
          if xn or yn then
            if xn and yn then return a < b end
            if desc then return xn end
            return yn
          end
          if x ~= y then if desc then return x > y end return x < y end
          return a < b
        end)
        return order
      end

      it("sorts along any dimension, stably, NaN last (first descending), rows past a CTA's chunk too", function()
        ref.rng("sort")
        -- rows sharing a CTA in the bitonic network (7, 5, 33), rows a CTA radix-sorts (9000 and
        -- 4500: 16 items a thread; 700, 300, 1000: 8), rows radix-sorted across CTAs (2 of 13000,
        -- 20000: 4 and 5 tiles; u8's single pass, 3 of 12289; one of 540000: 132 tiles, in slices
        -- of 33 whose second sweep of the offsets (32 tiles a sweep) ends short), the edges of each
        -- path (4097: the
        -- first of 16 items a thread; 12288: the longest a CTA sorts), rows of 8-byte dtypes in segments through the work buffer (5000,
        -- 2500); then every case through the bitonic network alone (RADIX_FROM past them all): its
        -- segments for 4-byte (9000, 13000) and compact items (4500, 20000) too
        local cases = { { { 3, 7 }, 2 }, { { 5, 4, 3 }, 1 }, { { 2, 3, 33 }, 3 }, { { 1, 5000 }, 2 }, { { 9000 }, 1 },
          { { 4, 700 }, 2 }, { { 300, 6 }, 1 }, { { 3, 2500 }, 2 }, { { 2, 4500 }, 2 }, { { 2, 13000 }, 2 },
          { { 20000 }, 1 }, { { 3, 1000 }, 2 }, { { 2, 4097 }, 2 }, { { 12288 }, 1 }, { { 3, 12289 }, 2 },
          { { 540000 }, 1 } }
        local sorts = require "tocha.tensor_sort"
        local radix_from = sorts.RADIX_FROM
        finally(function() sorts.RADIX_FROM = radix_from end)
        for round = 1, 2 do
          sorts.RADIX_FROM = round == 1 and radix_from or math.huge
          for c, case in ipairs(cases) do
            local shape, dim = case[1], case[2]
            local dt = ({ "f32", "bf16", "i32", "f64", "f32", "f16", "u8", "i64", "bf16", "f32", "bf16", "i32", "i32", "f16", "u8", "f16" })[c]
            -- few distinct values, so that ties are many; NaN sprinkled into floats
            local x = randn(shape):mul(3):round()
            if dt == "u8" then x = x:abs() end
            if dt:sub(1, 1) == "f" or dt == "bf16" then x = x:masked_fill(randn(shape):gt(1.6), 0 / 0) end
            x = x:cast(dt)
            local desc = c % 2 == 0
            local v, i = x:sort(dim, desc)
            assert.are.same(shape, v:size())
            assert.are.equal("i64", i:dtype())
            local xv = x:cast("f64"):to_table(true)
            local gv, gi = v:cast("f64"):to_table(true), i:to_table(true)
            -- each line along dim against the reference order
            local lines = ref.numel(shape) / shape[dim]
            local stride = 1
            for k = dim + 1, #shape do stride = stride * shape[k] end
            for l = 0, lines - 1 do
              local outer, inner = math.floor(l / stride), l % stride
              local function at(p) return (outer * shape[dim] + (p - 1)) * stride + inner + 1 end
              local line = {}
              for p = 1, shape[dim] do line[p] = xv[at(p)] end
              local order = reference_sort(line, desc)
              for p = 1, shape[dim] do
                local want_v = line[order[p]]
                local got_v = gv[at(p)]
                if gi[at(p)] ~= order[p] or not (got_v == want_v or (got_v ~= got_v and want_v ~= want_v)) then
                  error(("sort %s of %s along %d desc %s, line %d place %d: got %s at %d, want %s at %d"):format(dt,
                    table.concat(shape, "x"), dim, tostring(desc), l, p, tostring(got_v), gi[at(p)], tostring(want_v), order[p]))
                end
              end
            end
            same(x:argsort(dim, desc), gi, "argsort")
          end
        end
        sorts.RADIX_FROM = radix_from
        -- the ends of each dtype, signed zeros and infinities, both ways (descending keys of the
        -- lowest values meet the padding's key: the position keeps them first)
        local ends = {
          f32 = { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, 1e-40, -1e-40, 3.4e38, -3.4e38, 1, 0, -0.0, 1 / 0 },
          f16 = { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, 65504, -65504, 6e-8, -6e-8, 0, 1 / 0 },
          bf16 = { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, 1e-39, -1e-39, 3e38, 0, -1 / 0 },
          f64 = { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, 5e-324, -5e-324, 1.7e308, 0, -0.0 },
          i32 = { 0, -2147483648, 2147483647, -1, 1, -2147483648, 2147483647, 0 },
          u8 = { 0, 255, 1, 254, 0, 255, 128, 127 },
        }
        for dt, short in pairs(ends) do
          -- the ends alone (the bitonic network), forty times over (a CTA's radix sort) and 1600
          -- times (a radix sort across CTAs: 12800 and more)
          for _, times in ipairs({ 1, 40, 1600 }) do
            local values = {}
            for r = 1, times do for q = 1, #short do values[#values + 1] = short[q] end end
            local t = tocha.tensor(values, { device = device, dtype = dt })
            local seen = t:cast("f64"):to_table()
            for _, desc in ipairs({ false, true }) do
              local got_v, got_i = t:sort(1, desc)
              local gv, gi = got_v:cast("f64"):to_table(), got_i:to_table()
              local order = reference_sort(seen, desc)
              for p = 1, #values do
                local want, got = seen[order[p]], gv[p]
                if gi[p] ~= order[p] or not (got == want or (got ~= got and want ~= want)) then
                  error(("sort of %s's ends desc %s, place %d: got %s at %d, want %s at %d"):format(dt, tostring(desc), p,
                    tostring(got), gi[p], tostring(want), order[p]))
                end
                -- the value itself comes back: -0 stays -0
                if want == 0 then assert.are.equal(1 / want, 1 / got, dt .. " signed zero at " .. p) end
              end
            end
          end
        end
        -- i64 past 2^53 compares as integers (no double holds these apart)
        local huge = tocha.arange(2 ^ 53, 2 ^ 53 + 4, { device = device }):flip(1)
        local _, hi = huge:sort()
        assert.are.same({ 4, 3, 2, 1 }, hi:to_table())
        assert.are.same({ 1, 2, 3, 4 }, huge:argsort(1, true):to_table())
        local y = randn({ 4, 50 })
        -- topk against a Lua sort of each row (largest first, earlier position first on ties)
        local yv = y:to_table()
        local tv, ti = y:topk(5, 2)
        local tvv, tiv = tv:to_table(), ti:to_table()
        for r = 1, 4 do
          local order = reference_sort(yv[r], true)
          for p = 1, 5 do
            assert.are.equal(order[p], tiv[r][p])
            assert.are.equal(yv[r][order[p]], tvv[r][p])
          end
        end
        -- topk of short rows selects in a warp: many ties, NaN, every 32-bit dtype, k up to 256,
        -- rows up to 2048 and a row count no multiple of the CTA's eight; and through the sorts past
        -- those (one CTA's radix sort, the radix sort across CTAs, the bitonic network for f64)
        for _, case in ipairs({ { 13, 1000, 5, "f32", true }, { 3, 2048, 256, "bf16", false }, { 9, 40, 33, "f16", true },
          { 5, 70, 69, "i32", false }, { 2, 100, 17, "u8", true }, { 2, 2100, 7, "f32", true }, { 2, 300, 9, "f64", false },
          { 3, 600, 300, "bf16", true }, { 3, 13000, 5, "i32", true }, { 2, 12500, 40, "f16", false } }) do
          local rows, n, k, dt, largest = case[1], case[2], case[3], case[4], case[5]
          local z = randn({ rows, n }):mul(3):round()
          if dt == "u8" then z = z:abs() end
          if dt:sub(1, 1) == "f" or dt == "bf16" then z = z:masked_fill(randn({ rows, n }):gt(1.8), 0 / 0) end
          z = z:cast(dt)
          local zv = z:cast("f64"):to_table()
          local kv, ki = z:topk(k, 2, largest)
          local kvv, kiv = kv:cast("f64"):to_table(), ki:to_table()
          for r = 1, rows do
            local order = reference_sort(zv[r], largest)
            for p = 1, k do
              local want, got = zv[r][order[p]], kvv[r][p]
              if kiv[r][p] ~= order[p] or not (got == want or (got ~= got and want ~= want)) then
                error(("topk %d of %s %dx%d largest %s, row %d place %d: got %s at %d, want %s at %d"):format(k, dt,
                  rows, n, tostring(largest), r, p, tostring(got), kiv[r][p], tostring(want), order[p]))
              end
            end
          end
        end
        local lv, li = y:topk(5, 2)
        local sv, si = y:sort(2, true)
        same(lv, sv:narrow(2, 1, 5):contiguous():to_table(true), "topk values")
        same(li, si:narrow(2, 1, 5):contiguous():to_table(true), "topk indices")
        local small = y:topk(3, -1, false)
        same(small, y:sort(2):narrow(2, 1, 3):contiguous():to_table(true), "topk smallest")
        assert.are.same({ 4, 0 }, y:topk(0, 2):size())
        fails_with("tocha.Tensor:topk: k: expected a whole number from 0 to 50 (the size along dim), got 51",
          function() y:topk(51, 2) end)
        -- median: the lower of the two middles; NaN where a NaN is in the line
        local m = tocha.tensor({ { 4, 1, 3, 2 }, { 5, 0 / 0, 1, 2 }, { 7, 7, 1, 9 } }, { device = device })
        local mv, mi = m:median(2)
        local g = mv:to_table()
        assert.are.same({ 2, 7 }, { g[1], g[3] })
        assert.is_true(g[2] ~= g[2])
        assert.are.same({ 4, 2, 1 }, mi:to_table())
        local two = tocha.tensor({ { 1, 0 / 0, 2, 0 / 0, 5 } }, { device = device })
        local _, ti2 = two:median(2)
        assert.are.same({ 2 }, ti2:to_table()) -- the first NaN's position, as PyTorch's
        assert.are.same({ 3, 1 }, ({ m:median(2, true) })[1]:size())
        assert.are.equal(2, tocha.tensor({ 5, 3, 1, 4, 2, 0 }, { device = device }):median():item())
        assert.is_true(m:median():item() ~= m:median():item())
      end)

      it("runs sums and products along rows and columns, integers into i64, halves in f32", function()
        ref.rng("cumsum")
        for _, dt in ipairs({ "f64", "f32", "bf16", "i32", "u8" }) do
          for _, prod in ipairs({ false, true }) do
            local shape = ref.random_shape(3, 40)
            local dim = math.random(1, #shape)
            if math.random() < 0.4 then dim = #shape end
            local x
            if dt == "i32" or dt == "u8" then -- i32 with negative values: they widen into the unsigned words
              local r = randn(shape):mul(prod and 1 or 30):round()
              x = (dt == "u8" and r:abs() or r):cast(dt)
            else
              x = prod and tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = 0.9, high = 1.1 }) or randn(shape, dt)
              seed = seed + 1
            end
            local y = prod and x:cumprod(dim) or x:cumsum(dim)
            local out_dt = (dt == "i32" or dt == "u8") and "i64" or dt
            assert.are.equal(out_dt, y:dtype())
            local xv, want = x:cast("f64"):to_table(true), {}
            for e = 1, #xv do
              local idx = indices_of(e, shape)
              local acc = prod and 1 or 0
              for k = 1, idx[dim] do
                local at = {}
                for q = 1, #shape do at[q] = idx[q] end
                at[dim] = k
                local v = xv[flat_of(at, shape)]
                acc = prod and acc * v or acc + v
              end
              want[e] = acc
            end
            local g = y:cast("f64"):to_table(true)
            local tol = ({ f64 = 1e-12, f32 = 1e-5, bf16 = 2 ^ -7, i64 = 0 })[out_dt]
            for e = 1, #want do
              local scale = prod and math.abs(want[e]) or 1 + math.sqrt(shape[dim]) * 4
              local err = math.abs(g[e] - ref.convert(want[e], out_dt))
              if err > tol * math.max(1, scale) + (out_dt == "bf16" and math.abs(want[e]) * 2 ^ -8 or 0) then
                error(("%s %s along %d of %s [%d]: got %.10g, want %.10g"):format(prod and "cumprod" or "cumsum", dt, dim,
                  table.concat(shape, "x"), e, g[e], want[e]))
              end
            end
          end
        end
        -- rows along the last dimension longer than a chunk (4096), too few for a warp each: the
        -- chunks' totals, their carries, each chunk from its carry; exclusive and from the end too
        local scans = require "tocha.tensor_reduce"
        for c, case in ipairs({ { { 2, 9000 }, "f32" }, { { 20000 }, "f64" }, { { 2, 8192 }, "bf16" },
          { { 12289 }, "i32" }, { { 4097 }, "u8" } }) do
          local shape, dt = case[1], case[2]
          for _, prod in ipairs({ false, true }) do
            local x
            if dt == "i32" or dt == "u8" then
              -- products: 1 and -1 (u8: 1), about one in 2000 doubled (a few twos a row: under 2^64),
              -- so that no product is 0 and the carries are more than 0 or 1
              local r = prod and randn(shape):sign():mul(randn(shape):gt(3.3):cast("f32"):add(1))
                or randn(shape):mul(3e5):round()
              if dt == "u8" then r = prod and r:abs():clamp(1, 2) or r:abs():clamp(0, 255) end
              x = r:cast(dt)
            else
              x = prod and tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = 0.999, high = 1.001 })
                or randn(shape, dt)
              seed = seed + 1
            end
            local n, rows = shape[#shape], ref.numel(shape) / shape[#shape]
            local out_dt = (dt == "i32" or dt == "u8") and "i64" or dt
            local xv = x:cast("f64"):to_table(true)
            for variant = 1, 3 do -- inclusive (x:cumsum), exclusive, exclusive from the end
              local exclusive, reverse = variant > 1, variant == 3
              local y
              if variant == 1 then
                y = prod and x:cumprod(#shape) or x:cumsum(#shape)
              else
                y = tocha.empty(shape, { dtype = out_dt, device = device })
                scans.scan_launch(x, y, rows, n, 1, dt, out_dt, prod, exclusive, reverse, require("tocha.device").wrap(x.dev))
              end
              local g = y:cast("f64"):to_table(true)
              local tol = ({ f64 = 1e-12, f32 = 1e-5, bf16 = 2 ^ -7, i64 = 0 })[out_dt]
              for r = 0, rows - 1 do
                local acc = prod and 1 or 0
                for s = 1, n do
                  local p = reverse and n + 1 - s or s
                  local e = r * n + p
                  local before = acc
                  acc = prod and acc * xv[e] or acc + xv[e]
                  local want = exclusive and before or acc
                  local scale = prod and math.abs(want) * (1 + s * 2 ^ -8) or 1 + math.sqrt(s) * 4
                  local err = math.abs(g[e] - ref.convert(want, out_dt))
                  if err > tol * math.max(1, scale) + (out_dt == "bf16" and math.abs(want) * 2 ^ -8 or 0) then
                    error(("long %s %s %s of %s row %d step %d: got %.10g, want %.10g"):format(prod and "cumprod" or "cumsum",
                      ({ "inclusive", "exclusive", "exclusive reverse" })[variant], dt, table.concat(shape, "x"), r, s, g[e], want))
                  end
                end
              end
            end
          end
        end
        -- an i64 row past a chunk wraps across chunks: k (2^62 + 2^50) mod 2^64, as a signed word,
        -- each chunk carrying 4096 2^50 = 2^62 on (every value a multiple of 2^50: exact in a double)
        local wraps = tocha.full({ 9000 }, 2 ^ 62 + 2 ^ 50, { dtype = "i64", device = device }):cumsum(1):to_table()
        local unit = 2 ^ 50
        for k = 1, 9000 do
          local m = (k * (2 ^ 12 + 1)) % 2 ^ 14 -- the sum in units of 2^50, mod 2^64
          local want = (m >= 2 ^ 13 and m - 2 ^ 14 or m) * unit
          if wraps[k] ~= want then error(("i64 wrap [%d]: got %s, want %s"):format(k, tostring(wraps[k]), tostring(want))) end
        end
        -- integer sums are exact past 2^53 and wrap as i64 does
        local big = tocha.tensor({ 2 ^ 62, 2 ^ 62, 1 }, { dtype = "i64", device = device }):cumsum(1)
        assert.are.equal(-2 ^ 63, big:to_table()[2])
        assert.are.equal(1, big:narrow(1, 3, 1):sub(big:narrow(1, 2, 1)):item()) -- -2^63 + 1, which no double holds
        assert.are.same({ 3, 0 }, tocha.empty({ 3, 0 }, { device = device }):cumsum(2):size())
        fails_with("tocha.Tensor:cumsum: dim: cumsum() needs a dimension, got nil", function() randn({ 2 }):cumsum() end)
      end)
    end)
  end
end)
