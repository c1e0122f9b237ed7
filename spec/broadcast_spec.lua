-- tocha.Broadcast: every function (masked_fill with two thirds of b NaN) on random broadcasting
-- shapes (either operand repeated, leading dimensions missing), forward against the eager tensor math and backward against
-- the gradients summed here in f64 over the output elements that read each operand element;
-- the squeeze-and-excitation scale in a model; bad shapes; tocha.BroadcastConstant's forward and
-- backward (x's gradient as Broadcast's, the constant on either side, of x's shape too). On sim
-- and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- d(value)/da * dy and d/db * dy, as elementwise.cu's structs define them.
local GRAD = {
  add = function(_, _, g) return g, g end,
  sub = function(_, _, g) return g, -g end,
  mul = function(a, b, g) return g * b, g * a end,
  div = function(a, b, g) return g / b, -g * a / (b * b) end,
  max = function(a, b, g) return a > b and g or a < b and 0 or g / 2, a < b and g or a > b and 0 or g / 2 end,
  min = function(a, b, g) return a < b and g or a > b and 0 or g / 2, a > b and g or a < b and 0 or g / 2 end,
  prelu = function(a, b, g) return a > 0 and g or g * b, a > 0 and 0 or g * a end,
  masked_fill = function(_, b, g) return b ~= b and g or 0, b ~= b and 0 or g end, -- NaN in b: a taken
}

-- Flat index of out-indices idx in a shape aligned to them (size 1 reads 0).
local function flat(idx, shape)
  local lead, pos = #idx - #shape, 0
  for k = 1, #shape do pos = pos * shape[k] + (shape[k] == 1 and 0 or idx[k + lead] - 1) end
  return pos + 1
end

describe("tocha.Broadcast", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt, positive)
        seed = seed + 1
        if positive then return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = 0.5, high = 2 }) end
        return tocha.randn(shape, { dtype = dt, device = device, seed = seed })
      end

      -- op's forward and backward on operands of shapes sa and sb against the eager tensor math
      -- and the gradients summed here in f64 (halves: each result within a rounding of the dtype).
      local function check(op, fn, dt, sa, sb)
        local a, b = randn(sa, dt), randn(sb, dt, fn == "div")
        if fn == "masked_fill" then -- two thirds of b NaN: a taken there
          local v = b:to_table(true)
          for i = 1, #v do if (i * 7) % 3 ~= 0 then v[i] = 0 / 0 end end
          b = tocha.tensor(v, { dtype = "f64", device = device }):view(sb):cast(dt)
        end
        local y = op:forward(a, b)
        local want = fn == "masked_fill" and tocha.where(b:ne(b), a, b) or ({ add = a + b, sub = a - b, mul = a * b, div = a / b,
          max = a:maximum(b), min = a:minimum(b), prelu = tocha.where(a:gt(0), a, a * b) })[fn]
        assert.is_true(tocha.allclose(y, want, 0, 0), fn .. " forward")
        local dy = randn(y:shape(), dt)
        local da, db = op:backward(a, b, dy)
        local av, bv, gv, out = a:to_table(true), b:to_table(true), dy:to_table(true), y:shape()
        local wa, wb = {}, {}
        for i = 1, #av do wa[i] = 0 end
        for i = 1, #bv do wb[i] = 0 end
        for e = 1, #gv do
          local idx, rest = {}, e - 1
          for k = #out, 1, -1 do idx[k] = rest % out[k] + 1; rest = math.floor(rest / out[k]) end
          local ia, ib = flat(idx, sa), flat(idx, sb)
          local ga, gb = GRAD[fn](av[ia], bv[ib], gv[e])
          wa[ia], wb[ib] = wa[ia] + ga, wb[ib] + gb
        end
        local tol = ({ f64 = 1e-12, f32 = 1e-5, bf16 = 2 ^ -7 })[dt]
        for _, pair in ipairs({ { da, wa, "da" }, { db, wb, "db" } }) do
          local got = pair[1]:to_table(true)
          for i = 1, #got do
            assert(math.abs(got[i] - pair[2][i]) <= tol * math.max(1, math.abs(pair[2][i])),
              ("%s %s %s %s %s [%d]: got %.12g, want %.12g"):format(fn, dt, table.concat(sa, "x"), table.concat(sb, "x"), pair[3], i,
                got[i], pair[2][i]))
          end
        end
      end

      it("computes every function forward and backward on broadcasting shapes", function()
        local CASES = { { { 2, 3, 4, 5 }, { 2, 3, 1, 1 } }, { { 4, 1, 5 }, { 3, 1 } }, { { 5 }, { 2, 3, 5 } }, { { 3, 4 }, { 3, 4 } } }
        for _, fn in ipairs({ "add", "sub", "mul", "div", "max", "min", "prelu", "masked_fill" }) do
          for _, dt in ipairs({ "f64", "f32" }) do
            local op = tocha.Broadcast.new(fn, dt)
            for _, c in ipairs(CASES) do check(op, fn, dt, c[1], c[2]) end
          end
        end
      end)

      it("sums gradients over long rows, split columns and several runs, in halves too", function()
        -- [1, 2, 80, 80] * [1, 2, 1, 1]: rows of 6400, a CTA each, split in two and finished by a
        -- second pass; [64, 8] * [8]: columns split four ways; [3, 5, 2, 36] * [1, 5, 1, 1]: the
        -- run of 72 summed, then the run of 3 (a warp's lanes, then columns); [3, 1, 6] * [1, 7, 1]:
        -- neither operand of the output's shape, each summed over two runs; a [1] scalar; both of
        -- the output's shape, 35 elements (16-byte vectors and a tail).
        local CASES = { { { 1, 2, 80, 80 }, { 1, 2, 1, 1 } }, { { 64, 8 }, { 8 } }, { { 3, 5, 2, 36 }, { 1, 5, 1, 1 } },
          { { 3, 1, 6 }, { 1, 7, 1 } }, { { 4, 9 }, { 1 } }, { { 5, 7 }, { 5, 7 } } }
        for _, fn in ipairs({ "add", "sub", "mul", "div", "max", "prelu", "masked_fill" }) do
          for _, dt in ipairs({ "f32", "bf16" }) do
            local op = tocha.Broadcast.new(fn, dt)
            for _, c in ipairs(CASES) do
              if dt == "f32" or fn == "mul" or fn == "add" or fn == "prelu" or fn == "masked_fill" then check(op, fn, dt, c[1], c[2]) end
            end
          end
        end
      end)

      it("scales channels in a model (squeeze and excitation), backward included", function()
        local x = tocha.Model.input({ -1, 4, 5, 5 })
        local gap = tocha.AdaptiveAvgPool2d.new { output_size = 1 }
        local gate = tocha.Elementwise.new("sigmoid")
        local scale = tocha.Broadcast.new("mul")
        local m = tocha.Model({ x }, { scale(x, gate(gap(x))) })
        m:load(2, device)
        local xt = randn({ 2, 4, 5, 5 }, "f32")
        local out, cache = m:forward_train({ xt })
        local s = xt:mean({ 3, 4 }, true):sigmoid()
        assert.is_true(tocha.allclose(out[1], xt * s, 1e-6, 1e-7))
        local grads = m:backward({ randn({ 2, 4, 5, 5 }, "f32") }, cache)
        assert.are.same({ 2, 4, 5, 5 }, grads[1]:shape())
      end)

      it("runs a backward with a workspace in a model as a direct call runs it", function()
        -- [B, 4, 1, 5] * [B, 1, 3, 1]: each gradient reads the other spread into the workspace
        local x, z = tocha.Model.input({ -1, 4, 1, 5 }), tocha.Model.input({ -1, 1, 3, 1 })
        local op = tocha.Broadcast.new("mul")
        local m = tocha.Model({ x, z }, { op(x, z) })
        m:load(2, device)
        assert.is_true(op:workspace_bytes({ { 2, 4, 1, 5 }, { 2, 1, 3, 1 } }) > 0)
        local xt, zt, dy = randn({ 2, 4, 1, 5 }, "f32"), randn({ 2, 1, 3, 1 }, "f32"), randn({ 2, 4, 3, 5 }, "f32")
        local out, cache = m:forward_train({ xt, zt })
        assert.is_true(tocha.allclose(out[1], xt * zt, 0, 0))
        local grads = m:backward({ dy }, cache)
        local dx, dz = op:backward(xt, zt, dy)
        assert.is_true(tocha.allclose(grads[1], dx, 0, 0))
        assert.is_true(tocha.allclose(grads[2], dz, 0, 0))
      end)

      it("gives BroadcastConstant's x the gradient Broadcast gives its operand, on either side", function()
        for _, c in ipairs({ { "mul", { 3, 1, 1 }, false }, { "sub", { 1 }, true }, { "div", { 5 }, true },
          { "div", { 2, 3, 4, 5 }, false }, { "sub", { 2, 3, 4, 5 }, true }, { "max", { 4, 1 }, false } }) do
          local fn, cshape, first = c[1], c[2], c[3]
          local op = tocha.BroadcastConstant.new(fn, cshape, { constant_first = first })
          local plain = tocha.Broadcast.new(fn)
          local x, k = randn({ 2, 3, 4, 5 }, "f32", true), randn(cshape, "f32", true)
          local y = op:forward(x, k)
          local a, b = x, k
          if first then a, b = k, x end
          assert.is_true(tocha.allclose(y, plain:forward(a, b), 0, 0), fn)
          local dy = randn(y:shape(), "f32")
          local dx, dk = op:backward(x, k, dy)
          local da, db = plain:backward(a, b, dy)
          assert.is_true(tocha.allclose(dx, first and db or da, 0, 0), fn .. " dx")
          assert.are.equal(0, dk:abs():max():item(), fn .. ": the constant gets no gradient")
          -- in a model: the node's parameter holds the constant
          local input = tocha.Model.input({ -1, 3, 4, 5 })
          local m = tocha.Model({ input }, { op(input) })
          m:load(2, device)
          for _, t in pairs(m:parameters()) do t:copy(k) end
          local out, cache = m:forward_train({ x })
          assert.is_true(tocha.allclose(out[1], y, 0, 0), fn .. " in a model")
          assert.is_true(tocha.allclose(m:backward({ dy }, cache)[1], dx, 0, 0), fn .. " dx in a model")
        end
      end)

      it("refuses shapes that do not broadcast", function()
        local op = tocha.Broadcast.new("add")
        fails("b: shape [3] does not broadcast with [2, 4] (a's): sizes 3 and 4 at dimension 1 from the end",
          op.forward, op, randn({ 2, 4 }, "f32"), randn({ 3 }, "f32"))
        fails("fn: expected one of add, sub, mul, div, max, min, prelu, masked_fill, got \"pow\"", tocha.Broadcast.new, "pow")
      end)
    end)
  end
end)
