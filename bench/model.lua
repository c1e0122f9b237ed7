-- bench/model.lua: the detector neck's top-down path (examples/neck_model.lua) at the sizes a
-- 640 input gives (P5 256x20x20, P4 128x40x40, P3 64x80x80; a bias and a mean loss on N3),
-- f32, at batch 1, 16 and 64:
--   * forward_us: m:forward called one by one (host and device, synchronised once at the end)
--     per forward, what PyTorch eager is timed as; forward_host_us, the host's part alone
--     (batches of 20 forwards timed on the host, the queue drained between), beside launches
--     (the kernels a forward launches) and the launch floor: the driver's own cost of one
--     launch (bench/launch_floor.lua, timed the same way), measured in the same run, so that
--     forward_host_us / (launches x floor) is what the host adds to the launches;
--   * replay_us: the captured forward (m:capture) replayed on its own inputs, per forward;
--   * replay_copy_us: c:replay(inputs), the inputs copied in first, per forward;
--   * device_ms: the device time of one forward between events, and floor_ms, the sum over
--     its nodes of (bytes read + written) / copy bandwidth: the time the ops would take at
--     the bandwidth of a copy, launches aside.
-- bench/model_torch.py times PyTorch eager (and CUDA-graphed) on the same DAG.
--   tocha bench/model.lua [--out DIR] [--reps N]
local tocha = require "tocha"
local timing = require "bench.timing"
package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../examples/?.lua;" .. package.path
local neck_model = require "neck_model"

local opts = timing.arguments(arg, { out = "results/tmp-model", reps = 200 })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
local SIZE = { c5 = 256, c4 = 128, c3 = 64, h5 = 20, w5 = 20 }
local BATCHES = { 1, 16, 64 }
if device.kind == "sim" then -- the script's own check, not figures
  SIZE, BATCHES, opts.reps = { c5 = 8, c4 = 4, c3 = 2, h5 = 2, w5 = 3 }, { 1, 2 }, 3
end
print(("model benchmark on %s (%s), %d reps"):format(device.name, device.product, opts.reps))
local copy_gbps = device.kind == "sim" and 1 or timing.copy_bandwidth(device)

local now_us = timing.now_us

-- Microseconds per call of fn over reps calls, synchronised once at the end (after a warm-up).
local function per_call_us(fn)
  for _ = 1, 5 do fn() end
  tocha.synchronize(device.name)
  local t0 = now_us()
  for _ = 1, opts.reps do fn() end
  tocha.synchronize(device.name)
  return (now_us() - t0) / opts.reps
end

local numel = timing.numel

-- Microseconds per empty driver launch, called as forward calls it (0 where there is no driver).
local function launch_floor_us()
  if device.kind ~= "cuda" then return 0 end
  local launch, driver_sync, close = require("bench.launch_floor").empty_launch()
  if not launch then
    io.stderr:write("launch floor not measured: ", driver_sync, "\n")
    return 0
  end
  -- Timed as bench/upsample.lua times it: host time of batches of launches, drained between.
  local us = timing.host_us_per_call(launch, driver_sync, 10 * opts.reps)
  close()
  return us
end

local rows = {}
for _, batch in ipairs(BATCHES) do
  local m = neck_model.build("f32", SIZE):load(batch, device.name)
  local inputs = {}
  for k, node in ipairs(m.inputs) do inputs[k] = tocha.randn(m.shape[node], { device = device, seed = k }) end
  local want = m:forward(inputs)[1]:clone()
  local c = m:capture()
  local got = c:replay(inputs)[1]
  assert(tocha.compare(got, want, { rtol = 0, atol = 0 }).ok, "the replay differs from the forward")
  -- The floor: every node reads its inputs and writes its output once.
  local bytes = 0
  for _, n in ipairs(m.order) do
    if n.op then
      bytes = bytes + 4 * numel(m.shape[n])
      for _, input in ipairs(n.inputs) do bytes = bytes + 4 * numel(m.shape[input]) end
    end
  end
  local row = {
    batch = batch,
    forward_us = per_call_us(function() m:forward(inputs) end),
    -- The host's part alone, timed as the launch floor is (batches of 20 forwards, 220 launches,
    -- drained between): what the 1.2 x launches x floor target is about. Back to back, the
    -- forward above also waits for the device once its queue is ahead.
    forward_host_us = timing.host_us_per_call(function() m:forward(inputs) end,
      function() tocha.synchronize(device.name) end, 10 * opts.reps, 20),
    replay_us = per_call_us(function() c.graph:replay() end),
    replay_copy_us = per_call_us(function() c:replay(inputs) end),
    device_ms = timing.time_launches(device, function() c.graph:replay() end, opts.reps),
    floor_ms = bytes / (copy_gbps * 1e6),
    bytes = bytes,
    launches = m.launch_plan:launches(),
    launch_floor_us = launch_floor_us(),
  }
  rows[#rows + 1] = row
  print(("batch %3d: forward %8.1f us (host %.1f us, %d launches, floor %.2f us each), replay %8.1f us "
    .. "(with copies %8.1f), device %.4f ms, floor %.4f ms (x%.2f)")
    :format(batch, row.forward_us, row.forward_host_us, row.launches, row.launch_floor_us, row.replay_us,
      row.replay_copy_us, row.device_ms, row.floor_ms, row.device_ms / row.floor_ms))
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "batch", "forward_us", "forward_host_us", "launches", "launch_floor_us", "replay_us", "replay_copy_us", "device_ms", "floor_ms",
    "bytes" }, rows)
local f = assert(io.open(opts.out .. "/host.csv", "w"))
f:write("measure,value\ncopy_gbps,", copy_gbps, "\n")
f:close()
print("wrote " .. opts.out .. "/tocha.csv")
