-- tocha.Softmax and tocha.LogSoftmax as ops: forward equal to the methods, backward against the
-- gradients worked out here in f64 from y and dy (softmax: y (dy - sum(dy y)); log-softmax:
-- dy - exp(y) sum(dy)) along rows, long rows and a middle dimension; against central
-- differences (tocha.gradcheck) in f64; in a model; bad arguments. On sim and, tagged #gpu,
-- on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- Row-major index helpers: the elements along dimension d through flat element i.
local function along(shape, d)
  local inner = 1
  for k = d + 1, #shape do inner = inner * shape[k] end
  return inner, shape[d]
end

describe("tocha.Softmax and tocha.LogSoftmax", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt, device = device, seed = seed })
      end

      it("matches the methods forward and the worked-out gradient backward", function()
        for _, case in ipairs({ { { 6, 10 }, 2 }, { { 2, 1500 }, -1 }, { { 3, 5, 4 }, 2 }, { { 4, 3 }, 1 } }) do
          for _, dt in ipairs({ "f32", "f64", "bf16" }) do
            for _, log in ipairs({ false, true }) do
              local shape, dim = case[1], case[2]
              local op = (log and tocha.LogSoftmax or tocha.Softmax).new(dim, dt)
              local x = randn(shape, dt)
              local y = op:forward(x)
              local want = log and x:log_softmax(dim) or x:softmax(dim)
              assert.is_true(tocha.allclose(y, want, 0, 0), "forward equals the method")
              local dy = randn(shape, dt)
              local dx = op:backward(x, y, dy)
              local d = dim < 0 and #shape + 1 + dim or dim
              local inner, n = along(shape, d)
              local yv, gv, got = y:to_table(true), dy:to_table(true), dx:to_table(true)
              for i = 1, #yv do
                local pos = math.floor((i - 1) / inner) % n
                local first = i - pos * inner
                local dot = 0
                for j = 0, n - 1 do
                  local k = first + j * inner
                  dot = dot + (log and gv[k] or gv[k] * yv[k])
                end
                local w = log and gv[i] - math.exp(yv[i]) * dot or yv[i] * (gv[i] - dot)
                local tol = (dt == "bf16" and 4 or 64) * ref.eps[dt] * math.max(1, math.abs(dot), math.abs(gv[i]))
                assert(math.abs(got[i] - ref.convert(w, dt)) <= tol,
                  ("%s %s %s dim %d [%d]: got %.10g want %.10g"):format(log and "log_softmax" or "softmax", dt,
                    table.concat(shape, "x"), dim, i, got[i], w))
              end
            end
          end
        end
      end)

      -- Rows of whole 16-byte groups are held in registers: up to 1024 elements by a warp's
      -- lanes (4 or 8 groups a lane in f32, 4 in halves, 8 in f64), rows of 2 to 8 groups a
      -- thread by a CTA (2048, 4096 and 8192 in f32, 4096 and 8192 in halves, 1024 to 4096 in
      -- f64, 4 or 8 groups a thread); others (1, 7, 1025, 8200 elements, 8192 in f64, an
      -- unaligned view) are read again. Each element against softmax worked out here in f64
      -- from x as stored, and the gradient from y and dy as stored; the second row of each x
      -- masked (its first third -inf, as an attention mask); the method x:softmax(2) gives the
      -- op's y.
      it("holds rows in registers and reads the others again, forward and backward", function()
        local function value(i) return ((i * 37) % 101) / 17 - 3 end
        for _, n in ipairs({ 1, 7, 8, 80, 256, 512, 1000, 1024, 1025, 2048, 4096, 8192, 8200 }) do
          for _, dt in ipairs({ "f32", "f64", "f16", "bf16" }) do
            for _, shift in ipairs({ 0, 1 }) do -- 1: rows one element past a 16-byte boundary
              local rows = shift == 0 and 5 or 3
              local xs = {}
              for i = 1, rows * n + shift do
                local r, c = math.floor((i - 1 - shift) / n), (i - 1 - shift) % n
                xs[i] = (r == 1 and c < math.floor(n / 3)) and -math.huge or value(i)
              end
              local flat = tocha.tensor(xs, { dtype = dt, device = device })
              local x = flat:narrow(1, 1 + shift, rows * n):view(rows, n)
              local dy = randn({ rows * n + shift }, dt):narrow(1, 1 + shift, rows * n):view(rows, n)
              for _, log in ipairs({ false, true }) do
                local op = (log and tocha.LogSoftmax or tocha.Softmax).new(2, dt)
                local y = op:forward(x)
                local dx = op:backward(x, y, dy)
                local xv, yv, gv, got = x:to_table(true), y:to_table(true), dy:to_table(true), dx:to_table(true)
                local label = ("%s %s n %d shift %d"):format(log and "log_softmax" or "softmax", dt, n, shift)
                local mv = (log and x:log_softmax(2) or x:softmax(2)):to_table(true)
                for k = 1, #yv do assert(mv[k] == yv[k], ("%s: the method's [%d] differs"):format(label, k)) end
                for r = 0, rows - 1 do
                  local top, sum, dot = -math.huge, 0, 0
                  for c = 1, n do top = math.max(top, xv[r * n + c]) end
                  for c = 1, n do sum = sum + math.exp(xv[r * n + c] - top) end
                  for c = 1, n do
                    local k = r * n + c
                    dot = dot + (log and gv[k] or gv[k] * yv[k])
                  end
                  for c = 1, n do
                    local k = r * n + c
                    local w = log and xv[k] - top - math.log(sum) or math.exp(xv[k] - top) / sum
                    local tol = ((dt == "f16" or dt == "bf16") and 1 or 16) * ref.eps[dt] * math.max(1, math.abs(w))
                    assert(w == yv[k] or math.abs(yv[k] - w) <= tol,
                      ("%s y[%d][%d]: got %.10g want %.10g"):format(label, r + 1, c, yv[k], w))
                    local g = log and gv[k] - math.exp(yv[k]) * dot or yv[k] * (gv[k] - dot)
                    tol = ((dt == "f16" or dt == "bf16") and 4 or 64) * ref.eps[dt] * math.max(1, math.abs(dot), math.abs(gv[k]))
                    assert(math.abs(got[k] - ref.convert(g, dt)) <= tol,
                      ("%s dx[%d][%d]: got %.10g want %.10g"):format(label, r + 1, c, got[k], g))
                  end
                end
              end
            end
          end
        end
      end)

      it("passes gradcheck in f64", function()
        for _, log in ipairs({ false, true }) do
          local op = (log and tocha.LogSoftmax or tocha.Softmax).new(2, "f64")
          local x = randn({ 3, 7 }, "f64")
          local dy = randn({ 3, 7 }, "f64")
          local dx = op:backward(x, op:forward(x), dy):to_table(true)
          local xv, gv = x:to_table(true), dy:to_table(true)
          local h = 1e-6
          for i = 1, #xv do
            local function loss(v)
              local t = tocha.tensor(xv, { dtype = "f64", device = device }):view(3, 7)
              t[{ math.floor((i - 1) / 7) + 1, (i - 1) % 7 + 1 }] = v
              local yv, s = op:forward(t):to_table(true), 0
              for k = 1, #yv do s = s + yv[k] * gv[k] end
              return s
            end
            local num = (loss(xv[i] + h) - loss(xv[i] - h)) / (2 * h)
            assert(math.abs(num - dx[i]) <= 1e-6 * math.max(1, math.abs(num)), ("[%d]: %.12g vs %.12g"):format(i, dx[i], num))
          end
        end
      end)

      it("runs in a model, backward included", function()
        local input = tocha.Model.input({ -1, 10 })
        local op = tocha.LogSoftmax.new(-1)
        local m = tocha.Model({ input }, { op(input) })
        m:load(4, device)
        local x = randn({ 4, 10 })
        local out, cache = m:forward_train({ x })
        assert.is_true(tocha.allclose(out[1], x:log_softmax(2), 0, 0))
        local dy = randn({ 4, 10 })
        local grads = m:backward({ dy }, cache)
        assert.is_true(tocha.allclose(grads[1], op:backward(x, out[1], dy), 0, 0))
      end)

      it("refuses bad arguments by name", function()
        fails("dim: expected a dimension (1-based; -1 the last), got nil", tocha.Softmax.new)
        fails("dim: expected 1 to the tensor's dimensions (or -1 for the last), got 0", tocha.Softmax.new, 0)
        fails("dtype: expected a float dtype (f32, f64, f16, bf16), got u8", tocha.LogSoftmax.new, 1, "u8")
        local op = tocha.Softmax.new(3)
        fails("x: dim 3 is outside its 2 dimensions", op.forward, op, randn({ 2, 3 }))
        local x = randn({ 2, 3 })
        fails("y: expected shape [2, 3] (x's), got [3, 2]", op.backward, tocha.Softmax.new(2), x, randn({ 3, 2 }), x)
      end)
    end)
  end
end)
