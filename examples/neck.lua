-- neck.lua: a feature pyramid's top-down path, the fragment of a detector's neck that feeds an
-- upsample, built as a tocha.Model and checked end to end; `make neck` runs it.
--
--   P5 [B, 64, 5, 5] --up 2x2--> [B, 64, 10, 10] --join with P4 [B, 32, 10, 10]--> [B, 96, 10, 10]
--   --silu--> A;  N4 = A * halve(A), halve a custom op written in Lua (x * 0.5, with its backward)
--   N4 --up 2x2--> join with P3 [B, 16, 20, 20] --gelu--> N3
--
-- N3 then gets a bias a channel (a parameter) and gelu; the model's second output is the loss
-- L = mean(N3), a reduction. It runs the model forward and backward (A feeds two readers, N3
-- two: their gradients are summed), checks the gradients of all three inputs and of the bias
-- for L against central differences in f64 (tocha.gradcheck, through the model), then captures
-- the forward as a graph and checks that replaying it on new inputs gives what a forward gives.
-- Exits non-zero on a mismatch.
local tocha = require "tocha"

local device = tocha.default_device()
print(("tocha %s on %s (%s)"):format(tocha.version, device.name, device.product))

-- The model (with its custom op written in Lua): examples/neck_model.lua, beside this file.
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local neck_model = require "neck_model"
local function neck(dt) return neck_model.build(dt, { c5 = 64, c4 = 32, c3 = 16, h5 = 5, w5 = 5 }) end

local failures = 0
local function check(ok, what)
  print(("%-64s %s"):format(what, ok and "ok" or "MISMATCH"))
  if not ok then failures = failures + 1 end
end

-- Forward and backward at batch 4 in f32.
local B = 4
local m = neck("f32"):load(B)
print(("\nbuffers: %d blocks, %d bytes (%d without reuse)"):format(m.plan.blocks, m.plan.bytes,
  m.plan.without_reuse_bytes))
local inputs = { tocha.randn({ B, 64, 5, 5 }, { seed = 1 }), tocha.randn({ B, 32, 10, 10 }, { seed = 2 }),
  tocha.randn({ B, 16, 20, 20 }, { seed = 3 }) }
local y = m:forward(inputs)[1]
print("N3 " .. y:summary())
local outs, cache = m:forward_train(inputs)
check(tocha.compare(outs[1], y, { rtol = 0, atol = 0 }).ok, "forward_train's output equals forward's")
check(tocha.compare(outs[2], tocha.Reduce.new("mean"):forward(y), { rtol = 0, atol = 0 }).ok, "the loss is mean(N3)")
print(("L = %.6f"):format(outs[2]:to_table(true)[1]))
local grads, param_grads = m:backward({ tocha.zeros(y:shape()), tocha.ones({ 1 }) }, cache)
for i, name in ipairs({ "P5", "P4", "P3" }) do print(("d%s %s"):format(name, grads[i]:summary())) end
print("dN3bias.bias " .. param_grads["N3bias.bias"]:summary())

-- The gradients against central differences, in f64, one input at a time.
local m64 = neck("f64"):load(1)
local x64 = { tocha.randn({ 1, 64, 5, 5 }, { dtype = "f64", seed = 5 }),
  tocha.randn({ 1, 32, 10, 10 }, { dtype = "f64", seed = 6 }), tocha.randn({ 1, 16, 20, 20 }, { dtype = "f64", seed = 7 }) }
for i, name in ipairs({ "P5", "P4", "P3" }) do
  local wrapped = {
    forward = function(_, x)
      local given = { x64[1], x64[2], x64[3] }
      given[i] = x
      return m64:forward(given)[2]:clone()
    end,
    backward = function(_, x, dy)
      local given = { x64[1], x64[2], x64[3] }
      given[i] = x
      local o, c = m64:forward_train(given)
      return m64:backward({ tocha.zeros(o[1]:shape(), { dtype = "f64" }), dy }, c)[i]
    end,
  }
  local ok, report = tocha.gradcheck(wrapped, x64[i], { seed = i, max_checks = 60 })
  check(ok, ("d%s against central differences (max abs error %.2g)"):format(name, report.max_abs))
end

-- The bias's gradient for L against central differences: L as a function of the bias.
m64:parameters()["N3bias.bias"]:copy(tocha.randn({ 112 }, { dtype = "f64", seed = 8 }))
local through_bias = {
  forward = function(_, b)
    m64:parameters()["N3bias.bias"]:copy(b)
    return m64:forward(x64)[2]:clone()
  end,
  backward = function(_, b, dy)
    m64:parameters()["N3bias.bias"]:copy(b)
    local o, c = m64:forward_train(x64)
    return select(2, m64:backward({ tocha.zeros(o[1]:shape(), { dtype = "f64" }), dy }, c))["N3bias.bias"]
  end,
}
local ok, report = tocha.gradcheck(through_bias, m64:parameters()["N3bias.bias"]:clone(), { seed = 9, max_checks = 40 })
check(ok, ("dN3bias.bias against central differences (max abs error %.2g)"):format(report.max_abs))

-- The forward captured once and replayed on new inputs.
local captured = m:capture()
for round = 1, 3 do
  local fresh = { tocha.randn({ B, 64, 5, 5 }, { seed = 10 * round }),
    tocha.randn({ B, 32, 10, 10 }, { seed = 10 * round + 1 }), tocha.randn({ B, 16, 20, 20 }, { seed = 10 * round + 2 }) }
  local replayed = captured:replay(fresh)[1]:clone()
  check(tocha.compare(replayed, m:forward(fresh)[1], { rtol = 0, atol = 0 }).ok,
    ("replay %d on new inputs equals a forward"):format(round))
end

if failures > 0 then
  io.stderr:write(failures, " check(s) failed\n")
  os.exit(1)
end
print("\nall checks passed")
