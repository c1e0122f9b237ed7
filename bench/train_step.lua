-- bench/train_step.lua: one training step of torchvision's ResNet-18 at 224 x 224 (the file
-- bench/networks_torch.py export DIR writes, DIR/resnet18_b64.onnx), imported unfused
-- (tocha.onnx.load with fuse = false: every BatchNorm a layer of its own, in training mode) in
-- both layouts (channels-last "nhwc", the import's default, and ONNX's "nchw") and trained: the
-- forward keeping what the backward needs, cross entropy on random labels, the backward
-- through every layer (the image's own gradient not computed: m:backward's inputs = false, as
-- PyTorch's input without requires_grad), an AdamW step over the 11.7 M parameters; batch 64
-- in f32 and bf16 (the whole network and its optimizer in one dtype, as PyTorch's
-- model.to(dtype); not f16, whose range AdamW's steps leave without loss scaling). The median device time of a step over N
-- steps, after 5 that warm up (kernels built, buffers allocated).
-- bench/train_step_torch.py DIR times PyTorch's step on the same network (eager, NCHW and
-- channels_last) and writes the report.
-- --file and --size take another exported ResNet (the script's own check on sim: a small one).
--   tocha bench/train_step.lua [--out DIR] [--steps N] [--batch B] [--only PATTERN] [--file F --size S]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-networks", steps = 20, batch = 64, only = "", file = "", size = 224 })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("training-step benchmark on %s (%s), %d steps each"):format(device.name, device.product, opts.steps))

local file = opts.file ~= "" and opts.file or ("%s/resnet18_b%d.onnx"):format(opts.out, opts.batch)
local rows = {}
for _, case in ipairs({ { "f32", "nhwc" }, { "f32", "nchw" }, { "bf16", "nhwc" }, { "bf16", "nchw" } }) do
  local dt, layout = case[1], case[2]
  local name = ("resnet18 train b%d %s %s"):format(opts.batch, dt, layout)
  if timing.selected(name, opts.only) then
    local m = tocha.onnx.load(file, { batch_size = opts.batch, dtype = dt, fuse = false, layout = layout })
    m:train(true)
    local opt = tocha.optim.AdamW(m:trainable_parameters(), { lr = 1e-3, weight_decay = 1e-2 })
    local x = tocha.randn({ opts.batch, 3, opts.size, opts.size }, { seed = 1, device = device.name }):cast(dt)
    local classes = m:forward({ x })[1]:shape()[2]
    -- labels 1 to classes (tocha's cross entropy takes them 1-based)
    local labels = tocha.rand({ opts.batch }, { seed = 2, low = 1, high = classes + 1, device = device.name }):round()
      :clamp(1, classes):cast("i64")
    local loss
    local function step()
      local outs, cache = m:forward_train({ x })
      local l, dlogits = tocha.loss.cross_entropy(outs[1], labels)
      local _, grads = m:backward({ dlogits }, cache, { inputs = false })
      opt:step(grads)
      loss = l
    end
    local ms = timing.time_launches(device, step, opts.steps)
    local value = loss:cast("f64"):item()
    if value ~= value then error(name .. ": the loss is NaN") end
    rows[#rows + 1] = { network = "resnet18", batch = opts.batch, dtype = dt, layout = layout, step_ms = ms, loss = value }
    print(("%-33s step %9.4f ms  (%.1f images/s)  loss %.4f"):format(name, ms, opts.batch / ms * 1000, value))
    m, opt = nil, nil
    collectgarbage()
  end
end
local f = assert(io.open(opts.out .. "/train_tocha.csv", "w"))
f:write("network,batch,dtype,layout,step_ms,loss\n")
for _, r in ipairs(rows) do
  f:write(("%s,%d,%s,%s,%.6f,%.6g\n"):format(r.network, r.batch, r.dtype, r.layout, r.step_ms, r.loss))
end
f:close()
print("wrote " .. opts.out .. "/train_tocha.csv")
