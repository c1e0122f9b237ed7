-- bench/data_parallel.lua: data-parallel training of torchvision's ResNet-18 (the file
-- bench/networks_torch.py export DIR writes, DIR/resnet18_b64.onnx), imported unfused in the
-- channels-last layout and trained with tocha.DataParallel at B images a device (default 64):
-- the step (forward, cross entropy, backward, gradients averaged, AdamW) on one device and on
-- every device given, each timed as the wall time of N steps after 3 that warm up, every device
-- synchronized after the last. Scaling efficiency = one device's step time / R devices' step
-- time (each device doing B images either way); the replicas' trainable parameters are checked
-- bit-equal after the timed steps.
-- bench/data_parallel_torch.py DIR times PyTorch's DistributedDataParallel (one process a GPU,
-- NCCL) on the same network and batch and writes the report.
--   tocha bench/data_parallel.lua [--out DIR] [--devices A,B,...] [--steps N] [--batch B] [--dtype D]
--     [--file F --size S]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-data-parallel", devices = "", steps = 20, batch = 64,
  dtype = "f32", file = "", size = 224 })
os.execute("mkdir -p '" .. opts.out .. "'")
local names = timing.device_names(opts.devices)
local file = opts.file ~= "" and opts.file or ("%s/resnet18_b%d.onnx"):format(opts.out, opts.batch)
print(("data-parallel ResNet-18 training over %s, %d images a device, %s, NCCL %s"):format(table.concat(names, ", "),
  opts.batch, opts.dtype, tocha.comm.nccl() or "unavailable"))

local function synchronize_all(devices)
  for _, n in ipairs(devices) do tocha.synchronize(n) end
end

-- Wall milliseconds a training step over devices (a list of names), B images on each.
local function step_ms(devices)
  local R = #devices
  local m = tocha.onnx.load(file, { batch_size = opts.batch, dtype = opts.dtype, fuse = false, device = devices[1] })
  m:train(true)
  local x = tocha.randn({ opts.batch * R, 3, opts.size, opts.size }, { seed = 1, device = devices[1] }):cast(opts.dtype)
  local classes = m:forward({ x:narrow(1, 1, opts.batch):contiguous() })[1]:shape()[2]
  local labels = tocha.rand({ opts.batch * R }, { seed = 2, low = 1, high = classes + 1, device = devices[1] }):round()
    :clamp(1, classes):cast("i64")
  local loss, step, dp
  if R == 1 then
    -- the baseline: the plain one-device step, no DataParallel
    local opt = tocha.optim.AdamW(m:trainable_parameters(), { lr = 1e-3, weight_decay = 1e-2 })
    step = function()
      local outs, cache = m:forward_train({ x })
      local l, dlogits = tocha.loss.cross_entropy(outs[1], labels)
      local _, grads = m:backward({ dlogits }, cache, { inputs = false })
      opt:step(grads)
      loss = l
    end
  else
    dp = tocha.DataParallel(m, devices):load(opts.batch * R)
    local optimizers = dp:optimizers(function(p) return tocha.optim.AdamW(p, { lr = 1e-3, weight_decay = 1e-2 }) end)
    -- the batch placed on the devices once, as each process of DDP holds its own slice
    local xs, ys = dp:scatter(x), dp:scatter(labels)
    step = function() loss = dp:train_step({ xs }, ys, tocha.loss.cross_entropy, optimizers) end
  end
  for _ = 1, 3 do step() end
  synchronize_all(devices)
  local t0 = timing.now_us()
  for _ = 1, opts.steps do step() end
  synchronize_all(devices)
  local ms = (timing.now_us() - t0) / 1000 / opts.steps
  if type(loss) ~= "number" then loss = loss:cast("f64"):item() end
  if loss ~= loss then error("the loss is NaN") end
  if not dp then return ms, loss end
  -- every replica holds the first's trainable parameters, bit for bit (the running statistics
  -- are each slice's until the next forward copies the first's)
  local first = dp.models[1]:trainable_parameters()
  for r = 2, R do
    for name, t in pairs(dp.models[r]:trainable_parameters()) do
      local d = (t:to(devices[1]):cast("f64") - first[name]:cast("f64")):abs():amax():item()
      if d ~= 0 then error(("replica %d's %s differs from the first's by %g"):format(r, name, d)) end
    end
  end
  return ms, loss
end

local rows = {}
local one_ms, one_loss = step_ms({ names[1] })
rows[#rows + 1] = { devices = 1, batch_per_device = opts.batch, dtype = opts.dtype, step_ms = one_ms,
  images_per_s = opts.batch / one_ms * 1000, efficiency = 1, loss = one_loss }
print(("%d device   step %9.3f ms  %8.1f images/s  loss %.4f"):format(1, one_ms, opts.batch / one_ms * 1000, one_loss))
if #names > 1 then
  local ms, loss = step_ms(names)
  local R = #names
  rows[#rows + 1] = { devices = R, batch_per_device = opts.batch, dtype = opts.dtype, step_ms = ms,
    images_per_s = R * opts.batch / ms * 1000, efficiency = one_ms / ms, loss = loss }
  print(("%d devices  step %9.3f ms  %8.1f images/s  loss %.4f  scaling efficiency %.1f%%"):format(R, ms, R * opts.batch / ms * 1000,
    loss, 100 * one_ms / ms))
end
timing.write_csv(opts.out .. "/tocha.csv",
  { "devices", "batch_per_device", "dtype", "step_ms", "images_per_s", "efficiency", "loss" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
