-- bench/recurrent.lua: recurrent layers as a user writes them, a Linear projecting every step's
-- input (x W_ih^T + b_ih, one product) then tocha.Recurrent (the recurrence over the steps), on
-- the shapes of language and sequence models: an LSTM and a GRU of 512 over 50 steps at batch 64,
-- a PTB-style LSTM of 650 over 35 steps at batch 20, a wide LSTM of 1024 over 128 steps at batch
-- 16, a GRU of 256 over 200 steps at batch 32 and an Elman RNN of 512; f32 and bf16, forward and
-- backward (the Recurrent's backward through time, then the Linear's). Median device time over
-- N calls, each allocating its results as a user's call does, and TFLOP/s counting the products
-- (2 T B G H (I + H) a forward, twice that a backward). Each case is checked first against the
-- same layer in f64 on the same device. bench/recurrent_torch.py times torch.nn.LSTM, GRU and RNN
-- (cuDNN's persistent and per-step kernels, whichever it picks) on the same cases.
--   tocha bench/recurrent.lua [--out DIR] [--launches N] [--only PATTERN]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-recurrent", launches = 20, only = "" })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

-- {name, mode, steps T, batch B, input size I, hidden size H}
local CASES = {
  { "lstm 512 T50 B64", "lstm", 50, 64, 512, 512 },
  { "gru 512 T50 B64", "gru", 50, 64, 512, 512 },
  { "lstm 650 T35 B20", "lstm", 35, 20, 650, 650 },
  { "lstm 1024 T128 B16", "lstm", 128, 16, 1024, 1024 },
  { "gru 256 T200 B32", "gru", 200, 32, 256, 256 },
  { "rnn_tanh 512 T50 B64", "rnn_tanh", 50, 64, 512, 512 },
}
local GATES = { lstm = 4, gru = 3, rnn_tanh = 1, rnn_relu = 1 }
local DTYPES = { "f32", "bf16" }
if device.kind == "sim" then -- a run there checks the script; its times mean nothing
  DTYPES = { "f32" }
  for _, c in ipairs(CASES) do c[3], c[4], c[5], c[6] = 3, 2, 8, 8 end
end

-- The layer's parameters (PyTorch's uniform start) and a projection and recurrence of dtype dt.
local function layer(mode, T, I, H, dt)
  local g = GATES[mode]
  local proj = tocha.Linear.new(I, g * H, { dtype = dt })
  local rec = tocha.Recurrent.new(mode, H, T, { dtype = dt })
  local bound = 1 / math.sqrt(H)
  local function uniform(shape, seed)
    return tocha.rand(shape, { dtype = "f64", device = device.name, seed = seed }):mul(2 * bound):add(-bound)
  end
  local p = { w_ih = uniform({ g * H, I }, 11), b_ih = uniform({ g * H }, 12), w_hh = uniform({ g * H, H }, 13),
    b_hh = uniform({ g * H }, 14) }
  return proj, rec, p
end

local function cast_all(p, dt)
  local r = {}
  for k, v in pairs(p) do r[k] = v:cast(dt) end
  return r
end

local function forward(proj, rec, p, x)
  local gx = proj:forward(x, p.w_ih, p.b_ih)
  local y = rec:forward(gx, p.w_hh, p.b_hh)
  return y, gx
end

local rows = {}
for _, c in ipairs(CASES) do
  if timing.selected(c[1], opts.only) then
    local name, mode, T, B, I, H = c[1], c[2], c[3], c[4], c[5], c[6]
    local G = GATES[mode]
    for _, dt in ipairs(DTYPES) do
      local proj, rec, p64 = layer(mode, T, I, H, dt)
      local p = cast_all(p64, dt)
      local function randn(seed) return tocha.randn({ T, B, I }, { dtype = dt, device = device.name, seed = seed }) end
      local xs = { randn(1), randn(2) }
      -- the same layer in f64 on the first input
      local proj64, rec64 = layer(mode, T, I, H, "f64")
      local want = forward(proj64, rec64, p64, xs[1]:cast("f64"))
      local got = forward(proj, rec, p, xs[1])
      local tol = dt == "f32" and 1e-3 or 5e-2
      local r = tocha.compare(got:cast("f64"), want, { rtol = tol, atol = tol })
      if not r.ok then error(("%s %s: %d elements differ from the f64 layer's"):format(name, dt, r.mismatched)) end
      local flops = 2 * T * B * G * H * (I + H)
      local ms = timing.time_launches(device, function(i)
        local y, gx = forward(proj, rec, p, xs[i % 2 + 1])
        y:free() gx:free()
      end, opts.launches)
      local function row(pass, f, t)
        rows[#rows + 1] = { name = name, pass = pass, dtype = dt, mode = mode, steps = T, batch = B, input = I, hidden = H,
          flops = f, ms = t, tflops = f / (t * 1e9) }
        print(("%-22s %-8s %-5s %9.4f ms %8.2f TFLOP/s"):format(name, pass, dt, t, f / (t * 1e9)))
      end
      row("forward", flops, ms)
      -- backward: the recurrence's (which runs its forward first: it reads y), then the projection's
      local gxs = { proj:forward(xs[1], p.w_ih, p.b_ih), proj:forward(xs[2], p.w_ih, p.b_ih) }
      local dy = tocha.randn(rec:compute_concrete_output_shape({ gxs[1]:shape() }),
        { dtype = dt, device = device.name, seed = 7 })
      local bms = timing.time_launches(device, function(i)
        local k = i % 2 + 1
        local dgx, dw_hh, db_hh = rec:backward(gxs[k], p.w_hh, p.b_hh, dy)
        local dx, dw_ih, db_ih = proj:backward(xs[k], p.w_ih, p.b_ih, dgx)
        for _, t in ipairs({ dgx, dw_hh, db_hh, dx, dw_ih, db_ih }) do t:free() end
      end, opts.launches)
      row("backward", 2 * flops, bms)
      for _, t in ipairs({ dy, gxs[1], gxs[2], xs[1], xs[2], got, want }) do t:free() end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "name", "pass", "dtype", "mode", "steps", "batch", "input", "hidden", "flops", "ms", "tflops" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
