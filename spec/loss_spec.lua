-- tocha.loss: cross entropy (ignored rows, label smoothing), NLL, MSE, L1 and BCE with logits,
-- mean / sum / none, the loss against a reference computed here in f64 from the definitions
-- and the gradient against central differences of the loss (f64) and, for reduction none,
-- weighted by grad_output; halves; bad arguments. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

local function close(got, want, tol, label)
  assert(math.abs(got - want) <= tol * math.max(1, math.abs(want)), ("%s: got %.12g, want %.12g"):format(label, got, want))
end

-- The per-row cross entropy (log_input: rows already log-probabilities) of rows x (a list of
-- lists) against 1-based targets, smoothing e; nil for an ignored row.
local function class_ref(x, targets, e, ignore, log_input)
  local out = {}
  for i, row in ipairs(x) do
    local t = targets[i]
    if t ~= ignore then
      local C, lse, m = #row, 0, -math.huge
      if not log_input then
        for _, v in ipairs(row) do m = math.max(m, v) end
        for _, v in ipairs(row) do lse = lse + math.exp(v - m) end
        lse = math.log(lse)
      else
        m = 0
      end
      local all = 0
      for _, v in ipairs(row) do all = all + (v - m - lse) end
      out[i] = -(1 - e) * (row[t] - m - lse) - e / C * all
    end
  end
  return out
end

local function reduced(per, n, reduction)
  local s, count = 0, 0
  for i = 1, n do if per[i] then s, count = s + per[i], count + 1 end end
  if reduction == "sum" then return s end
  return s / count
end

describe("tocha.loss", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt or "f64", device = device, seed = seed })
      end

      -- Central differences of the scalar loss fn(x) (x f64, reduced loss) against grad.
      local function gradcheck(fn, x, grad, label)
        local xv, gv = x:to_table(true), grad:to_table(true)
        local h = 1e-6
        for k = 1, #xv do
          local function at(v)
            local t = tocha.tensor(xv, { dtype = "f64", device = device }):view(x:shape())
            t:view(-1)[k] = v
            return (fn(t):item())
          end
          local num = (at(xv[k] + h) - at(xv[k] - h)) / (2 * h)
          close(gv[k], num, 1e-6, ("%s gradient [%d]"):format(label, k))
        end
      end

      it("computes cross entropy and NLL with ignored rows and label smoothing, every reduction", function()
        local N, C = 6, 5
        local x = randn({ N, C })
        local targets = { 1, 5, -100, 2, 3, 5 }
        local t = tocha.tensor(targets, { dtype = "i64", device = device })
        local xv = x:to_table()
        for _, log_input in ipairs({ false, true }) do
          local fn = log_input and tocha.loss.nll or tocha.loss.cross_entropy
          local input = log_input and x:log_softmax(2) or x
          local iv = input:to_table()
          for _, e in ipairs({ 0, 0.2 }) do
            local per = class_ref(iv, targets, e, -100, log_input)
            for _, reduction in ipairs({ "mean", "sum", "none" }) do
              local label = ("%s e=%g %s"):format(log_input and "nll" or "cross_entropy", e, reduction)
              local loss, grad = fn(input, t, { reduction = reduction, label_smoothing = e })
              if reduction == "none" then
                local lv = loss:to_table(true)
                for i = 1, N do close(lv[i], per[i] or 0, 1e-12, label .. " row " .. i) end
              else
                assert.are.same({ 1 }, loss:size())
                close(loss:item(), reduced(per, N, reduction), 1e-12, label)
                gradcheck(function(v) return (fn(v, t, { reduction = reduction, label_smoothing = e })) end, input, grad, label)
              end
            end
          end
        end
        -- reduction none with an upstream gradient: row i's gradient times grad_output[i]
        local g = randn({ N })
        local _, d1 = tocha.loss.cross_entropy(x, t, { reduction = "none", grad_output = g })
        local _, d0 = tocha.loss.cross_entropy(x, t, { reduction = "sum" })
        local gv, a, b = g:to_table(true), d1:to_table(), d0:to_table()
        for i = 1, N do for c = 1, C do close(a[i][c], b[i][c] * gv[i], 1e-12, "grad_output") end end
        local _ = xv
      end)

      it("computes cross entropy over rows of many classes (read in 16-byte groups) in every float dtype", function()
        -- C = 203: rows start off 16-byte boundaries and hold many groups; every loss and
        -- gradient element against an f64 reference from the values the tensor holds.
        local N, C, e = 5, 203, 0.1
        local targets = { 7, 203, 1, -100, 100 }
        for _, dt in ipairs({ "f64", "f32", "f16", "bf16" }) do
          local x = randn({ N, C }, dt)
          local t = tocha.tensor(targets, { dtype = "i64", device = device })
          local xv = x:cast("f64"):to_table()
          local per = class_ref(xv, targets, e, -100, false)
          local tol = dt == "f64" and 1e-12 or dt == "f32" and 1e-5 or 2e-2
          local loss, grad = tocha.loss.cross_entropy(x, t, { label_smoothing = e })
          close(loss:cast("f64"):item(), reduced(per, N, "mean"), tol, "cross_entropy " .. dt)
          local gv = grad:cast("f64"):to_table()
          for i = 1, N do
            local row, m, s = xv[i], -math.huge, 0
            for _, v in ipairs(row) do m = math.max(m, v) end
            for _, v in ipairs(row) do s = s + math.exp(v - m) end
            for c = 1, C do
              local want = 0
              if targets[i] ~= -100 then
                want = (math.exp(row[c] - m) / s - e / C - (c == targets[i] and 1 - e or 0)) / (N - 1)
              end
              close(gv[i][c], want, tol, ("cross_entropy %s grad [%d][%d]"):format(dt, i, c))
            end
          end
        end
      end)

      it("computes MSE, L1 and BCE with logits, every reduction", function()
        local x, y = randn({ 3, 4 }), randn({ 3, 4 })
        local p = tocha.rand({ 3, 4 }, { dtype = "f64", device = device, seed = 99 })
        local xv, yv, pv = x:to_table(true), y:to_table(true), p:to_table(true)
        local defs = {
          mse = { function(a, b) return (a - b) ^ 2 end, y, yv },
          l1 = { function(a, b) return math.abs(a - b) end, y, yv },
          bce_with_logits = { function(a, b)
            local s = 1 / (1 + math.exp(-a))
            return -(b * math.log(s) + (1 - b) * math.log(1 - s))
          end, p, pv },
        }
        for name, d in pairs(defs) do
          for _, reduction in ipairs({ "mean", "sum", "none" }) do
            local loss, grad = tocha.loss[name](x, d[2], { reduction = reduction })
            local per, s = {}, 0
            for i = 1, #xv do per[i] = d[1](xv[i], d[3][i]); s = s + per[i] end
            if reduction == "none" then
              local lv = loss:to_table(true)
              for i = 1, #xv do close(lv[i], per[i], 1e-12, name .. " none " .. i) end
            else
              close(loss:item(), reduction == "sum" and s or s / #xv, 1e-12, name .. " " .. reduction)
              gradcheck(function(v) return (tocha.loss[name](v, d[2], { reduction = reduction })) end, x, grad, name)
            end
          end
        end
      end)

      it("computes halves in f32 and returns the loss in the input's dtype", function()
        for _, dt in ipairs({ "f16", "bf16", "f32" }) do
          local x = randn({ 4, 7 }, dt)
          local t = tocha.tensor({ 7, 1, 3, 3 }, { dtype = "i64", device = device })
          local loss, grad = tocha.loss.cross_entropy(x, t)
          assert.are.equal(dt, loss:dtype())
          assert.are.equal(dt, grad:dtype())
          local want = reduced(class_ref(x:to_table(), { 7, 1, 3, 3 }, 0, -100, false), 4, "mean")
          close(loss:item(), want, dt == "f32" and 1e-6 or 1e-2, "cross_entropy " .. dt)
        end
      end)

      it("refuses bad arguments by name and goes on", function()
        local x = randn({ 3, 4 })
        local t = tocha.tensor({ 1, 2, 3 }, { dtype = "i64", device = device })
        fails("target: row 2 holds 9, outside the classes 1 to 4 (and not ignore_index -100)",
          tocha.loss.cross_entropy, x, tocha.tensor({ 1, 9, 3 }, { dtype = "i64", device = device }))
        fails("target: row 1 holds 0, outside the classes 1 to 4", tocha.loss.nll, x, tocha.tensor({ 0, 1, 1 }, { dtype = "i64", device = device }))
        fails("target: expected i64 class indices (1-based), got f64", tocha.loss.cross_entropy, x, randn({ 3 }))
        fails("target: expected shape [3] (one index a row of input), got [2]", tocha.loss.cross_entropy, x,
          tocha.tensor({ 1, 2 }, { dtype = "i64", device = device }))
        fails("input: expected [N, C] (a row of C classes each), got 3 dimensions", tocha.loss.cross_entropy, randn({ 2, 3, 4 }), t)
        fails('reduction: expected "mean", "sum" or "none", got "avg"', tocha.loss.mse, x, x, { reduction = "avg" })
        fails("label_smoothing: expected a number from 0 to 1, got 2", tocha.loss.cross_entropy, x, t, { label_smoothing = 2 })
        fails("target: expected shape [3, 4] (input's), got [4, 3]", tocha.loss.l1, x, randn({ 4, 3 }))
        fails("grad_output: only for reduction \"none\"", tocha.loss.mse, x, x, { grad_output = x })
        fails('"weight": unknown option', tocha.loss.cross_entropy, x, t, { weight = x })
        assert.are.equal(0, (tocha.loss.mse(x, x)):item())
      end)
    end)
  end
end)
