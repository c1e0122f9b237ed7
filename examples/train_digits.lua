-- train_digits.lua: a small CNN trained on scikit-learn's 8x8 handwritten digits (1,797 images,
-- examples/data, written by make_digits.py) with cross entropy and AdamW, to >= 97% accuracy on
-- the images it never trained on (the learning rate on a cosine to 0). Prints a progress line
-- (step, loss, steps a second, time left) and the test accuracy after each epoch.
--
--   tocha examples/train_digits.lua [--epochs N] [--steps N] [--out DIR] [--devices A,B,...]
--
-- --steps stops the run after N steps (the schedule then spans those), without the accuracy
-- requirement: a short run for a replay.
-- With --out, DIR gets loss.csv (the loss of every step), loss.gp and loss.png (gnuplot's plot
-- of it, where gnuplot is installed), initial.safetensors (the parameters before the first
-- step, by PyTorch's names: conv1.weight, ...) and batches.npy (i64 [steps, 64], the 0-based
-- image indices of each step's batch), so that PyTorch can replay the same run
-- (spec/support/peer_train.py).
-- With --devices (e.g. sim,sim:1 or cuda:0,cuda:1), tocha.DataParallel trains
-- on all of them: each device a slice of every batch of 64, the gradients averaged, so the run
-- is the one-device run's.
local tocha = require "tocha"

local here = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or "."
local epochs, out, max_steps, devices = 15, nil, nil, nil
local i = 1
while arg and arg[i] do
  if arg[i] == "--epochs" then epochs = assert(tonumber(arg[i + 1]), "--epochs: expected a number") i = i + 2
  elseif arg[i] == "--steps" then max_steps = assert(tonumber(arg[i + 1]), "--steps: expected a number") i = i + 2
  elseif arg[i] == "--out" then out = assert(arg[i + 1], "--out: expected a folder") i = i + 2
  elseif arg[i] == "--devices" then
    devices = {}
    for name in assert(arg[i + 1], "--devices: expected names such as sim,sim:1"):gmatch("[^,]+") do devices[#devices + 1] = name end
    i = i + 2
  else error("train_digits.lua: unknown argument " .. arg[i] .. " (expected --epochs N, --steps N, --out DIR, --devices A,B)") end
end
local BATCH = 64

-- The data, on the host: 0..16 pixels and digits 0..9.
local images = tocha.load_npy(here .. "/data/digits_images.npy", { device = "sim" }):to_table(true)
local labels = tocha.load_npy(here .. "/data/digits_labels.npy", { device = "sim" }):to_table(true)
local count = #labels
-- Every fifth image is held out for the test (360 of them); the rest train.
local train, test = {}, {}
for k = 1, count do
  if (k - 1) % 5 == 0 then test[#test + 1] = k else train[#train + 1] = k end
end

-- A batch of images (scaled to [0, 1]) and their 1-based class indices, as tensors.
local function batch_of(indices)
  local x, y = {}, {}
  for b, k in ipairs(indices) do
    for p = 1, 64 do x[(b - 1) * 64 + p] = images[(k - 1) * 64 + p] / 16 end
    y[b] = labels[k] + 1
  end
  local n = #indices
  return tocha.tensor(x):view(n, 1, 8, 8), tocha.tensor(y, { dtype = "i64" })
end

-- The network, its layers named as a PyTorch module's attributes would be.
local x_in = tocha.Model.input({ -1, 1, 8, 8 }, { name = "x" })
local h = tocha.Conv2d.new(1, 16, 3, { padding = 1, activation = "relu" })(x_in):named("conv1")
h = tocha.Conv2d.new(16, 32, 3, { padding = 1, stride = 2, activation = "relu" })(h):named("conv2")
h = tocha.Flatten.new()(h)
h = tocha.Linear.new(32 * 4 * 4, 64, { activation = "relu" })(h):named("fc1")
local logits = tocha.Linear.new(64, 10)(h):named("fc2")
local m = tocha.Model({ x_in }, { logits })
-- One optimizer a device (one device without --devices); dp nil then.
local dp, opts
if devices then
  dp = tocha.DataParallel(m, devices):load(BATCH)
  opts = dp:optimizers(function(p) return tocha.optim.AdamW(p, { lr = 3e-3, weight_decay = 1e-2 }) end)
else
  m:load(BATCH)
  opts = { tocha.optim.AdamW(m:trainable_parameters(), { lr = 3e-3, weight_decay = 1e-2 }) }
end

-- The batch order: the training images shuffled each epoch by a xorshift32 of seed 1 + epoch
-- (Fisher-Yates), the last partial batch dropped.
local function shuffled(epoch)
  local order, s = {}, 2463534242 + epoch
  for k, v in ipairs(train) do order[k] = v end
  for k = #order, 2, -1 do
    s = bit.bxor(s, bit.lshift(s, 13)); s = bit.bxor(s, bit.rshift(s, 17)); s = bit.bxor(s, bit.lshift(s, 5))
    local j = (s % 2 ^ 32) % k + 1
    order[k], order[j] = order[j], order[k]
  end
  return order
end

-- The test accuracy of m (with --devices, the first device's replica: every replica holds the
-- same parameters). Loading for the test batch and back keeps the parameters' tensors, which
-- the optimizers step.
local function accuracy()
  local batch = dp and BATCH / #devices or BATCH
  m:load(#test, m.device)
  local x, y = batch_of(test)
  local predicted = m:forward({ x:to(m.device) })[1]:argmax(2):to_table(true)
  local want = y:to_table(true)
  local right = 0
  for k = 1, #want do if predicted[k] == want[k] then right = right + 1 end end
  m:load(batch, m.device)
  return right / #want
end

if out then
  os.execute("mkdir -p '" .. out:gsub("'", "'\\''") .. "'")
  tocha.save(out .. "/initial.safetensors", m:parameters())
end
local per_epoch = math.floor(#train / BATCH)
local steps = math.min(epochs * per_epoch, max_steps or math.huge)
local losses, order_rows, step, busy_ms = {}, {}, 0, 0
for epoch = 1, epochs do
  local order = shuffled(epoch)
  for b = 1, per_epoch do
    if step == steps then break end
    local rows = {}
    for k = 1, BATCH do rows[k] = order[(b - 1) * BATCH + k] end
    local x, y = batch_of(rows)
    -- the rate on a cosine from 3e-3 down to 0 over the run
    for _, opt in ipairs(opts) do opt:set_lr(3e-3 * 0.5 * (1 + math.cos(math.pi * step / steps))) end
    local loss
    busy_ms = busy_ms + tocha.time(function()
      if dp then
        loss = dp:train_step({ x }, y, tocha.loss.cross_entropy, opts)
      else
        local outs, cache = m:forward_train({ x })
        local l, dlogits = tocha.loss.cross_entropy(outs[1], y)
        local _, grads = m:backward({ dlogits }, cache, { inputs = false })
        opts[1]:step(grads)
        loss = l:item()
      end
    end, m.device)
    step = step + 1
    losses[step] = loss
    for k = 1, BATCH do order_rows[#order_rows + 1] = rows[k] - 1 end
    if step % 25 == 0 or step == steps then
      local rate = step / (busy_ms / 1000)
      print(("step %4d/%d  loss %.4f  %.1f steps/s  %.0f s left"):format(step, steps, losses[step], rate, (steps - step) / rate))
    end
  end
  if step == steps and max_steps then break end
  print(("epoch %d: test accuracy %.2f%%"):format(epoch, 100 * accuracy()))
end
local final = accuracy()
print(("test accuracy %.2f%% after %d steps (%d images held out)"):format(100 * final, steps, #test))

if out then
  local f = assert(io.open(out .. "/loss.csv", "w"))
  f:write("step,loss\n")
  for k, l in ipairs(losses) do f:write(("%d,%.9g\n"):format(k, l)) end
  f:close()
  tocha.save_npy(out .. "/batches.npy", tocha.tensor(order_rows, { dtype = "i64" }):view(steps, BATCH))
  local gp = assert(io.open(out .. "/loss.gp", "w"))
  gp:write('set terminal pngcairo size 900,500\nset output "loss.png"\nset datafile separator ","\n',
    'set xlabel "step"\nset ylabel "cross entropy"\nset logscale y\nset grid\n',
    'plot "loss.csv" every ::1 using 1:2 with lines title "train loss (batch 64)"\n')
  gp:close()
  local plotted = os.execute("command -v gnuplot >/dev/null 2>&1 && cd '" .. out:gsub("'", "'\\''") .. "' && gnuplot loss.gp")
  print(((plotted == 0 or plotted == true) and "wrote %s/loss.png, loss.csv, initial.safetensors, batches.npy"
    or "wrote %s/loss.csv, loss.gp (gnuplot is not installed), initial.safetensors, batches.npy"):format(out))
end
if final < 0.97 and not max_steps then error(("test accuracy %.2f%% is below 97%%"):format(100 * final)) end
