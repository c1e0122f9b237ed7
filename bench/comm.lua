-- bench/comm.lua: tocha.comm.all_reduce (sum, f32) over every device given, sizes from 1 MiB to
-- 256 MiB a rank, through NCCL where the devices are GPUs (and staged, for comparison, up to
-- 64 MiB). A call's time is the wall time of N calls, every device synchronized after the last,
-- over N; its bus bandwidth is NCCL's own measure (nccl-tests): bytes x 2 (R - 1) / R / time,
-- which a ring reaches at the links' speed whatever R is. Before timing, each size is checked:
-- every rank's result equals the sum of the ranks' inputs.
-- bench/comm_torch.py DIR times torch.cuda.nccl.all_reduce (the same one-process NCCL) and
-- torch.distributed's all_reduce (one process a GPU) on the same sizes and writes the report.
--   tocha bench/comm.lua [--out DIR] [--devices A,B,...] [--calls N] [--only PATTERN]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-comm", devices = "", calls = 20, only = "" })
os.execute("mkdir -p '" .. opts.out .. "'")
local names = timing.device_names(opts.devices)
local R = #names
local on_sim = tocha.device(names[1]).kind == "sim"
local nccl, why = tocha.comm.nccl()
print(("all_reduce over %s (%d ranks); NCCL %s"):format(table.concat(names, ", "), R, nccl or ("unavailable: " .. why)))

local sizes = on_sim and { 2 ^ 16, 2 ^ 20 } or { 2 ^ 20, 2 ^ 22, 2 ^ 24, 2 ^ 26, 2 ^ 28 }

local function synchronize_all()
  for _, n in ipairs(names) do tocha.synchronize(n) end
end

-- Wall milliseconds a call of fn, over `calls` calls after 3 that warm up.
local function time_calls(fn, calls)
  for _ = 1, 3 do fn() end
  synchronize_all()
  local t0 = timing.now_us()
  for _ = 1, calls do fn() end
  synchronize_all()
  return (timing.now_us() - t0) / 1000 / calls
end

-- The cases: NCCL at every size where the ranks are GPUs and it loads, the staged path beside
-- it up to 64 MiB (and alone where NCCL cannot run).
local cases = {}
for _, bytes in ipairs(sizes) do
  local through_nccl = nccl ~= nil and not on_sim
  if through_nccl then cases[#cases + 1] = { bytes = bytes, path = "nccl" } end
  if not through_nccl or bytes <= 2 ^ 26 then cases[#cases + 1] = { bytes = bytes, path = "staged" } end
end

local rows = {}
for _, case in ipairs(cases) do
  local bytes, path, staged = case.bytes, case.path, case.path == "staged"
  local name = ("all_reduce %d MiB %s"):format(bytes / 2 ^ 20, path)
  if bytes < 2 ^ 20 then name = ("all_reduce %d KiB %s"):format(bytes / 2 ^ 10, path) end
  if timing.selected(name, opts.only) then
    local n = bytes / 4
    local tensors = {}
    for r, dev in ipairs(names) do tensors[r] = tocha.rand({ n }, { device = dev, seed = r, low = -1, high = 1 }) end
    -- the check: every rank holds the sum of the inputs (f32 sums of R values, in any order)
    local want = tensors[1]:to(names[1])
    for r = 2, R do want:add_(tensors[r]:to(names[1])) end
    tocha.comm.all_reduce(tensors, { staged = staged })
    for r = 1, R do
      local err = (tensors[r]:to(names[1]) - want):abs():amax():item()
      if err > 1e-5 * R then error(("%s: rank %d differs from the sum by %g"):format(name, r, err)) end
    end
    local ms = time_calls(function() tocha.comm.all_reduce(tensors, { staged = staged }) end, opts.calls)
    local algbw = bytes / (ms * 1e6)
    local busbw = algbw * 2 * (R - 1) / R
    rows[#rows + 1] = { op = "all_reduce", path = path, ranks = R, bytes = bytes, ms = ms, algbw_gbps = algbw, busbw_gbps = busbw }
    print(("%-32s %9.4f ms  algbw %7.1f GB/s  busbw %7.1f GB/s"):format(name, ms, algbw, busbw))
    for _, t in ipairs(tensors) do t:free() end
    want:free()
  end
end
timing.write_csv(opts.out .. "/tocha.csv", { "op", "path", "ranks", "bytes", "ms", "algbw_gbps", "busbw_gbps" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
