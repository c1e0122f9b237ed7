-- bench/networks.lua: whole networks imported from ONNX files that PyTorch exported
-- (bench/networks_torch.py export DIR: torchvision's ResNet-18 at 224 x 224 and YOLOv8n, its
-- boxes decoded, at 640 x 640, randomly initialised), run by tocha at batch 1 and 64 in f32,
-- tf32 (f32 imported under tocha.set_float32_matmul_precision("high"): its convolutions and
-- products on tf32), f16 and bf16: the forward as m:forward runs it (the launch plan), its captured graph
-- replayed, and the device memory an inference holds. Each row is checked first: its outputs
-- against PyTorch's (DIR/<net>_b<batch>_out.npy, f32) within the dtype's tolerance.
-- bench/networks_torch.py time DIR times PyTorch on the same rows (eager, CUDA graph,
-- channels_last) and writes the report. Memory, both sides: the weights and what an
-- inference forward holds beyond its input (tocha: the loaded model's parameters, buffers and
-- workspace, and any more a forward's peak takes; PyTorch: its weights and the peak of an
-- eager forward past them and x).
--   tocha bench/networks.lua [--out DIR] [--launches N] [--only PATTERN]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-networks", launches = 20, only = "" })
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

local NETWORKS = { "resnet18", "yolov8n" }
local TOLERANCE = { f32 = 1e-4, tf32 = 1e-2, f16 = 1e-2, bf16 = 5e-2 }

local function relative(got, want)
  local g, w = got:cast("f64"):to_table(true), want:to_table(true)
  local big, worst = 0, 0
  for i = 1, #w do big = math.max(big, math.abs(w[i])) end
  for i = 1, #w do worst = math.max(worst, math.abs(g[i] - w[i])) end
  return worst / big
end

local rows = {}
for _, net in ipairs(NETWORKS) do
  for _, batch in ipairs({ 1, 64 }) do
    for _, dt in ipairs({ "f32", "tf32", "f16", "bf16" }) do
      local name = ("%s b%d %s"):format(net, batch, dt)
      if timing.selected(name, opts.only) then
        local file = ("%s/%s_b%d.onnx"):format(opts.out, net, batch)
        local stored = dt == "tf32" and "f32" or dt
        local x = tocha.load_npy(("%s/%s_b%d_in.npy"):format(opts.out, net, batch)):to(device.name):cast(stored)
        collectgarbage()
        tocha.memory.empty_cache()
        local before = tocha.memory.stats().allocated
        local precision = tocha.set_float32_matmul_precision(dt == "tf32" and "high" or "highest")
        local ok, m = pcall(tocha.onnx.load, file, { batch_size = batch, dtype = stored })
        tocha.set_float32_matmul_precision(precision)
        if not ok then error(m, 0) end
        collectgarbage() -- the load's temporaries (the file's f32 weights, BatchNorm folding)
        -- what the loaded model holds (parameters, buffers, workspace), and what a forward
        -- takes past it
        local held = tocha.memory.stats().allocated - before
        tocha.memory.reset_peak()
        local y = m:forward({ x })[1]
        held = held + tocha.memory.stats().peak - tocha.memory.stats().allocated
        local err = relative(y, tocha.load_npy(("%s/%s_b%d_out.npy"):format(opts.out, net, batch)))
        if err > TOLERANCE[dt] then error(("%s: logits differ by %.3g of the largest (tolerance %g)"):format(name, err, TOLERANCE[dt])) end
        local forward_ms = timing.time_launches(device, function() m:forward({ x }) end, opts.launches)
        local c = m:capture()
        c:replay({ x })
        local replay_ms = timing.time_launches(device, function() c:replay({ x }) end, opts.launches)
        rows[#rows + 1] = { network = net, batch = batch, dtype = dt, forward_ms = forward_ms, graph_ms = replay_ms,
          memory_mb = held / 2 ^ 20, error = err, nodes = #m.order }
        print(("%-20s forward %9.4f ms  graph %9.4f ms  %8.1f MB  error %.2g"):format(name, forward_ms, replay_ms,
          held / 2 ^ 20, err))
        c = nil
        m = nil
        collectgarbage()
      end
    end
  end
end
local f = assert(io.open(opts.out .. "/tocha.csv", "w"))
f:write("network,batch,dtype,forward_ms,graph_ms,memory_mb,error\n")
for _, r in ipairs(rows) do
  f:write(("%s,%d,%s,%.6f,%.6f,%.3f,%.3g\n"):format(r.network, r.batch, r.dtype, r.forward_ms, r.graph_ms, r.memory_mb, r.error))
end
f:close()
print("wrote " .. opts.out .. "/tocha.csv")
