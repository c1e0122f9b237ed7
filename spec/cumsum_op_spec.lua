-- tocha.CumSum as an op: every dimension of random shapes (the last: a warp a row; the others: a
-- thread a column), inclusive and exclusive, forward and reverse, every float dtype, against
-- running sums written here in Lua (f64; every element, the output poisoned first); the backward
-- against the transpose of the same sums; long rows (chunks through the workspace) against
-- running sums of each row and x:cumsum (their carries scanned by a CTA, and by a warp); in a
-- model beside its direct calls; bad arguments. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

-- The running sums of flat x (shape) along dimension d: {values, sums of |terms|}; and the
-- gradient of sum(y dy) for dy, {values, sums of |terms|}.
local function reference(xv, shape, d, exclusive, reverse, dyv)
  local outer, n, inner = 1, shape[d], 1
  for k = 1, d - 1 do outer = outer * shape[k] end
  for k = d + 1, #shape do inner = inner * shape[k] end
  local y, ya, dx, dxa = {}, {}, {}, {}
  for i = 1, #xv do dx[i], dxa[i] = 0, 1e-300 end
  for o = 0, outer - 1 do
    for i = 0, inner - 1 do
      local function at(k) return (o * n + k) * inner + i + 1 end
      for k = 0, n - 1 do
        local s, a = 0, 0
        for j = 0, n - 1 do
          local takes = reverse and (exclusive and j > k or not exclusive and j >= k)
            or not reverse and (exclusive and j < k or not exclusive and j <= k)
          if takes then
            s, a = s + xv[at(j)], a + math.abs(xv[at(j)])
            dx[at(j)] = dx[at(j)] + dyv[at(k)]
            dxa[at(j)] = dxa[at(j)] + math.abs(dyv[at(k)])
          end
        end
        y[at(k)], ya[at(k)] = s, a + 1e-300 -- (an empty sum is exactly 0)
      end
    end
  end
  return { y, ya }, { dx, dxa }
end

local TOL = { f64 = 1e-13, f32 = 1e-5, f16 = 2e-3, bf16 = 1.6e-2 }

describe("tocha.CumSum", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("sums along every dimension, inclusive or exclusive, forward or reverse, every float dtype", function()
        local rng = ref.rng("cumsum_op")
        local count = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, flags in ipairs({ { false, false }, { true, false }, { false, true }, { true, true } }) do
            count = count + 1
            -- rows longer than a warp's 32 along the last dimension, and short ones
            local shape = count % 2 == 0 and { math.random(1, 3), math.random(1, 4), math.random(33, 70) }
              or { math.random(1, 4), math.random(1, 9), math.random(1, 6) }
            for d = 1, #shape do
              local dim = d == #shape and -1 or d
              local op = tocha.CumSum.new(dim, { exclusive = flags[1], reverse = flags[2], dtype = dt })
              local x = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + count * 10 + d })
              local dy = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + 500 + count * 10 + d })
              local y = op:forward(x, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
              local dx = op:backward(x, dy, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
              local wy, wdx = reference(ref.values(x), shape, d, flags[1], flags[2], ref.values(dy))
              local label = ("%s dim %d of %s exclusive %s reverse %s"):format(dt, dim, table.concat(shape, "x"),
                tostring(flags[1]), tostring(flags[2]))
              ref.compare_terms(y, wy, TOL[dt], label .. " y")
              ref.compare_terms(dx, wdx, TOL[dt], label .. " dx")
            end
          end
        end
      end)

      it("takes long rows along the last dimension in chunks, as x:cumsum does, in a model too", function()
        local rng = ref.rng("cumsum_op_long")
        local shape = { 2, 9000 } -- two rows of three chunks (4096), the last short
        for c, flags in ipairs({ { false, false }, { true, false }, { false, true }, { true, true } }) do
          local dt = c % 2 == 0 and "bf16" or "f32"
          local op = tocha.CumSum.new(-1, { exclusive = flags[1], reverse = flags[2], dtype = dt })
          assert.is_true(op:workspace_bytes({ shape }) > 0)
          local x = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + c })
          local dy = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + 100 + c })
          local y = op:forward(x, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
          local dx = op:backward(x, dy, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
          -- running sums in f64, a row at a time: y along the op's direction, dx along the other
          local function sums(v, exclusive, reverse)
            local out, mag = {}, {}
            for r = 0, shape[1] - 1 do
              local s, a = 0, 0
              for k = 1, shape[2] do
                local e = r * shape[2] + (reverse and shape[2] + 1 - k or k)
                if exclusive then out[e], mag[e] = s, a + 1e-300 end
                s, a = s + v[e], a + math.abs(v[e])
                if not exclusive then out[e], mag[e] = s, a end
              end
            end
            return { out, mag }
          end
          local label = ("%s long rows exclusive %s reverse %s"):format(dt, tostring(flags[1]), tostring(flags[2]))
          ref.compare_terms(y, sums(ref.values(x), flags[1], flags[2]), TOL[dt], label .. " y")
          ref.compare_terms(dx, sums(ref.values(dy), flags[1], not flags[2]), TOL[dt], label .. " dx")
          if not flags[1] and not flags[2] then
            assert.is_true(tocha.allclose(y, x:cumsum(2), 0, 0), "the op's bits are x:cumsum's")
          end
          local input = tocha.Model.input({ -1, 9000 }, { dtype = dt })
          local m = tocha.Model({ input }, { op(input) }):load(2, device)
          local out, cache = m:forward_train({ x })
          assert.is_true(tocha.allclose(out[1], y, 0, 0), label .. ": the model's forward")
          assert.is_true(tocha.allclose(m:backward({ dy }, cache)[1], dx, 0, 0), label .. ": the model's backward")
        end
        -- carries by a warp (rows of more chunks than a CTA scans), as by a CTA
        local reduce_mod = require "tocha.tensor_reduce"
        local x = tocha.randn({ 3, 13000 }, { device = device, seed = rng.seed + 150 })
        local by_cta, exclusive_cta = x:cumsum(2), tocha.CumSum.new(2, { exclusive = true }):forward(x)
        local function middle() return reduce_mod.scan_plan(3, 13000, 1, "f32", "f32", false, false, false).launches[2].kernel.name end
        assert.are.equal("tocha_scan_chunks", middle())
        reduce_mod.carries_by_cta = 2
        local warp_middle = middle()
        local ok, by_warp = pcall(x.cumsum, x, 2)
        local ok2, exclusive_warp = pcall(function() return tocha.CumSum.new(2, { exclusive = true }):forward(x) end)
        reduce_mod.carries_by_cta = 4096
        assert.is_true(ok and ok2, tostring(by_warp) .. " " .. tostring(exclusive_warp))
        assert.are.equal("tocha_scan", warp_middle)
        local function close(a, b, what)
          local av, bv = ref.values(a), ref.values(b)
          for e = 1, #av do
            assert.is_true(math.abs(av[e] - bv[e]) <= 1e-4 * (1 + math.abs(bv[e])), ("%s: element %d"):format(what, e))
          end
        end
        close(by_warp, by_cta, "carries by a warp, inclusive")
        close(exclusive_warp, exclusive_cta, "carries by a warp, exclusive")
        -- one op over shapes in turn (its plan kept between calls must follow the shape): long rows,
        -- short ones, long rows of another length, columns, each as x:cumsum gives it
        local op = tocha.CumSum.new(-1)
        for i, s in ipairs({ { 2, 9000 }, { 3, 50 }, { 1, 13000 }, { 2, 9000 }, { 5000, 2 } }) do
          local x = tocha.randn(s, { device = device, seed = rng.seed + 200 + i })
          local y = op:forward(x, tocha.full(s, 0 / 0, { device = device }))
          assert.is_true(tocha.allclose(y, x:cumsum(-1), 0, 0), table.concat(s, "x") .. ": as x:cumsum")
          local dy = tocha.randn(s, { device = device, seed = rng.seed + 300 + i })
          local dx = op:backward(x, dy, tocha.full(s, 0 / 0, { device = device }))
          assert.is_true(tocha.allclose(dx, dy:flip(-1):cumsum(-1):flip(-1), 0, 0), table.concat(s, "x") .. ": dx")
        end
      end)

      it("runs in a model as in direct calls, backward included", function()
        local input = tocha.Model.input({ -1, 3, 40 })
        local c = tocha.CumSum.new(3, { reverse = true })
        local m = tocha.Model({ input }, { tocha.Elementwise.new("tanh")(c(input)) }):load(2, device)
        local x = tocha.randn({ 2, 3, 40 }, { device = device, seed = 21 })
        local out, cache = m:forward_train({ x })
        assert.is_true(tocha.allclose(out[1], c:forward(x):tanh(), 0, 0))
        local dy = tocha.randn({ 2, 3, 40 }, { device = device, seed = 22 })
        local want = c:backward(x, tocha.Elementwise.new("tanh"):backward(c:forward(x), dy))
        assert.is_true(tocha.allclose(m:backward({ dy }, cache)[1], want, 0, 0))
      end)

      it("refuses bad arguments, naming them", function()
        fails("dim: expected a dimension, 1-based (negative from the end), got 0", tocha.CumSum.new, 0)
        fails("dtype: expected a float dtype", tocha.CumSum.new, 1, { dtype = "i64" })
        fails("exclusive: expected a boolean", tocha.CumSum.new, 1, { exclusive = 1 })
        local op = tocha.CumSum.new(4)
        fails("x: dimension 4 is outside a shape of 3 dimensions", op.forward, op, tocha.zeros({ 2, 3, 4 }, { device = device }))
        assert.are.same({ 2, 3, 4, 1 }, op:forward(tocha.zeros({ 2, 3, 4, 1 }, { device = device })):shape())
      end)
    end)
  end
end)
