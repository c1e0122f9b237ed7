-- tocha.Permute and tocha.Slice: a view of x copied dense, against Lua's indexing of the same
-- elements, every output element checked (the output poisoned first), dtypes of every width,
-- random shapes, permutations and slices (negative steps, clamped and negative bounds); the
-- backward likewise (dx poisoned first: Permute's dy taken back, Slice's dy in its places and
-- zeros elsewhere), and both in a model's backward.
local tocha = require "tocha"
local ref = require "support.reference"

local function error_of(fn, ...)
  local ok, message = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

-- The flat 0-based index of position pos (1-based sizes) in a row-major shape.
local function flat(shape, pos)
  local k = 0
  for i = 1, #shape do k = k * shape[i] + (pos[i] - 1) end
  return k
end

-- Every position of shape, 1-based, in row-major order, to fn.
local function each(shape, fn)
  local pos = {}
  for i = 1, #shape do pos[i] = 1 end
  local n = ref.numel(shape)
  for _ = 1, n do
    fn(pos)
    for i = #shape, 1, -1 do
      pos[i] = pos[i] + 1
      if pos[i] <= shape[i] then break end
      pos[i] = 1
    end
  end
end

describe("tocha.Permute and tocha.Slice", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      ref.rng("strided " .. device)
      local rng = math.random

      it("permute every dimension as x.permute(dims) gives them, every dtype", function()
        for case = 1, 12 do
          local dt = ({ "f32", "f16", "i64", "u8", "f64", "bf16" })[case % 6 + 1]
          local shape = ref.random_shape(case % 5 + 2, 5)
          local dims = {}
          for i = 1, #shape do dims[i] = i end
          for i = #dims, 2, -1 do
            local j = rng(1, i)
            dims[i], dims[j] = dims[j], dims[i]
          end
          local x = tocha.rand(shape, { dtype = dt, device = device, seed = case, high = 100 })
          local op = tocha.Permute.new(dims, { dtype = dt })
          local out_shape = {}
          for i, d in ipairs(dims) do out_shape[i] = shape[d] end
          local y = tocha.full(out_shape, 77, { dtype = dt, device = device })
          op:forward(x, y)
          local xs, ys = x:to_table(true), y:to_table(true)
          each(out_shape, function(pos)
            local src = {}
            for i, d in ipairs(dims) do src[d] = pos[i] end
            local got, want = ys[flat(out_shape, pos) + 1], xs[flat(shape, src) + 1]
            assert(got == want, ("%s %s dims %s: y[%s] = %s, want %s"):format(dt, table.concat(shape, "x"), table.concat(dims, ","),
              table.concat(pos, ","), tostring(got), tostring(want)))
          end)
          -- backward: dx[x's position] = dy at the position the permutation took it to
          local dy = tocha.rand(out_shape, { dtype = dt, device = device, seed = 50 + case, high = 100 })
          local dx = tocha.full(shape, 77, { dtype = dt, device = device })
          op:backward(x, dy, dx)
          local dys, dxs = dy:to_table(true), dx:to_table(true)
          each(out_shape, function(pos)
            local src = {}
            for i, d in ipairs(dims) do src[d] = pos[i] end
            assert.are.equal(dys[flat(out_shape, pos) + 1], dxs[flat(shape, src) + 1])
          end)
        end
      end)

      it("slice as Python's x[a:b:s] does: negative and clamped bounds, negative steps", function()
        for case = 1, 16 do
          local dt = ({ "f32", "i32", "f16" })[case % 3 + 1]
          local shape = ref.random_shape(3, 7)
          local starts, ends, axes, steps = {}, {}, {}, {}
          for i = 1, #shape do
            local size = shape[i]
            axes[i] = rng(0, 1) == 1 and i or i - #shape - 1 -- 1-based or negative
            steps[i] = ({ 1, 2, 3, -1, -2 })[rng(1, 5)]
            starts[i] = rng(-size - 2, size + 2)
            ends[i] = rng(-size - 2, size + 2)
          end
          -- Python's slice.indices, to find the elements and skip the empty ones
          local picks, empty = {}, false
          for i = 1, #shape do
            local size, step = shape[i], steps[i]
            local function norm(v, lo, hi) if v < 0 then v = v + size end return math.max(lo, math.min(hi, v)) end
            local a, b
            if step > 0 then a, b = norm(starts[i], 0, size), norm(ends[i], 0, size)
            else a, b = norm(starts[i], -1, size - 1), norm(ends[i], -1, size - 1) end
            local list = {}
            local k = a
            while (step > 0 and k < b) or (step < 0 and k > b) do
              list[#list + 1] = k + 1
              k = k + step
            end
            picks[i] = list
            if #list == 0 then empty = true end
          end
          local op = tocha.Slice.new(starts, ends, { axes = axes, steps = steps, dtype = dt })
          local x = tocha.rand(shape, { dtype = dt, device = device, seed = 100 + case, high = 50 })
          if empty then
            assert.truthy(error_of(op.forward, op, x):find("is empty", 1, true))
          else
            local out_shape = {}
            for i = 1, #shape do out_shape[i] = #picks[i] end
            local y = tocha.full(out_shape, 77, { dtype = dt, device = device })
            op:forward(x, y)
            local xs, ys = x:to_table(true), y:to_table(true)
            each(out_shape, function(pos)
              local src = {}
              for i = 1, #shape do src[i] = picks[i][pos[i]] end
              assert.are.equal(xs[flat(shape, src) + 1], ys[flat(out_shape, pos) + 1])
            end)
            -- backward: dy at the sliced places, zeros at every other (dx poisoned first)
            local dy = tocha.rand(out_shape, { dtype = dt, device = device, seed = 200 + case, low = 1, high = 50 })
            local dx = tocha.full(shape, 77, { dtype = dt, device = device })
            op:backward(x, dy, dx)
            local want = {}
            for i = 1, ref.numel(shape) do want[i] = 0 end
            local dys = dy:to_table(true)
            each(out_shape, function(pos)
              local src = {}
              for i = 1, #shape do src[i] = picks[i][pos[i]] end
              want[flat(shape, src) + 1] = dys[flat(out_shape, pos) + 1]
            end)
            assert.are.same(want, dx:to_table(true))
          end
        end
      end)

      it("run in a model's backward as their direct calls do", function()
        local input = tocha.Model.input({ -1, 4, 6 })
        local permute = tocha.Permute.new({ 1, 3, 2 })                         -- [B, 6, 4]
        local slice = tocha.Slice.new({ 1 }, { 6 }, { axes = { 2 }, steps = { 2 } }) -- [B, 3, 4]
        local m = tocha.Model({ input }, { slice(permute(input)) })
        m:load(3, device)
        local x = tocha.randn({ 3, 4, 6 }, { seed = 9, device = device })
        local ys, cache = m:forward_train({ x })
        local p = permute:forward(x)
        assert.is_true(tocha.allclose(ys[1], slice:forward(p), 0, 0))
        local dy = tocha.randn(ys[1]:shape(), { seed = 10, device = device })
        local grads = m:backward({ dy }, cache)
        assert.is_true(tocha.allclose(grads[1], permute:backward(x, slice:backward(p, dy)), 0, 0))
      end)

      it("refuse bad arguments by name", function()
        assert.truthy(error_of(tocha.Permute.new, { 1, 1 }):find("dims[2]: expected each of 1 to 2 once, got 1", 1, true))
        assert.truthy(error_of(tocha.Permute.new, {}):find("dims: expected a list of 1 to 8 dimensions", 1, true))
        local p = tocha.Permute.new({ 2, 1 })
        assert.truthy(error_of(p.forward, p, tocha.ones({ 2, 3, 4 }, { device = device })):find("3 dimensions, the permutation has 2", 1, true))
        assert.truthy(error_of(tocha.Slice.new, { 0 }, { 1, 2 }):find("starts, ends: expected two lists of one length", 1, true))
        assert.truthy(error_of(tocha.Slice.new, { 0 }, { 1 }, { steps = { 0 } }):find("steps[1]: expected a non-zero integer", 1, true))
        local s = tocha.Slice.new({ 0 }, { 1 }, { axes = { 5 } })
        assert.truthy(error_of(s.forward, s, tocha.ones({ 2, 3 }, { device = device })):find("axes[1] = 5 is not one of its 2 dimensions", 1, true))
      end)
    end)
  end
end)
