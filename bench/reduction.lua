-- bench/reduction.lua: tocha.Reduce (sum, mean, max over every element and over one dimension)
-- and tocha.ChannelBiasAdd (forward; backward: dx = dy and the bias gradient), in f32, f16 and
-- bf16, on a detector neck's activations and large flat tensors: median device time over N
-- launches (two tensor sets in turn), GB/s of the bytes read plus written, % of the device's copy
-- bandwidth. Each op's output is checked against the same op on sim before it is timed.
-- bench/reduction_torch.py times PyTorch's same ops on the cases this writes.
--   tocha bench/reduction.lua [--out DIR] [--launches N] [--column_teams K]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-reduction", launches = 50, column_teams = 8 })
-- --column_teams K: the most row teams of the team columns kernel (1: never planned), for A/B runs
require("tocha.ops.reduction").column_teams = opts.column_teams
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))
local copy_gbps = timing.copy_rate(device)

-- {op, dim, shape}: dim 0 for every element; "bias" rows time ChannelBiasAdd.
local CASES = {
  { "sum", 0, { 2 ^ 24 } }, { "sum", 0, { 2 ^ 26 } }, { "mean", 0, { 2 ^ 26 } }, { "max", 0, { 2 ^ 26 } },
  { "sum", 0, { 16, 256, 80, 80 } }, { "sum", 2, { 16, 256, 80, 80 } }, { "mean", 4, { 16, 256, 80, 80 } },
  { "sum", 1, { 16, 256, 80, 80 } }, { "max", 2, { 16, 512, 40, 40 } }, { "sum", 2, { 16, 1024, 20, 20 } },
  { "sum", 2, { 4096, 4096 } }, { "sum", 1, { 4096, 4096 } }, { "sum", 2, { 8, 2 ^ 22 } },
  { "bias", 0, { 16, 256, 80, 80 } }, { "bias", 0, { 16, 512, 40, 40 } }, { "bias", 0, { 16, 1024, 20, 20 } },
  { "bias", 0, { 1, 256, 80, 80 } },
}
if device.kind == "sim" then CASES = { { "sum", 0, { 5000 } }, { "sum", 2, { 2, 3, 40 } }, { "bias", 0, { 2, 3, 8, 8 } } } end
local DTYPES = { "f32", "f16", "bf16" }

local numel = timing.numel

local function make(case, dt)
  if case[1] == "bias" then return tocha.ChannelBiasAdd.new(dt) end
  return tocha.Reduce.new(case[1], case[2] ~= 0 and case[2] or nil, dt)
end

-- The op's forward (and the bias's backward) on device against sim, on a small odd shape.
local function check(case, dt)
  local shape = case[1] == "bias" and { 2, 3, 50, 7 } or { 3, 7, 1999 }
  local dim = case[2] ~= 0 and math.min(case[2], 3) or nil
  local c = { case[1], dim or 0 }
  local x = tocha.randn(shape, { dtype = dt, device = "sim", seed = 1 })
  local want, got
  if case[1] == "bias" then
    local b = tocha.randn({ shape[2] }, { dtype = dt, device = "sim", seed = 2 })
    want = { make(c, dt):forward(x, b), select(2, make(c, dt):backward(x)) }
    local op = make(c, dt)
    got = { op:forward(x:to(device.name), b:to(device.name)), select(2, op:backward(x:to(device.name))) }
  else
    want = { make(c, dt):forward(x) }
    got = { make(c, dt):forward(x:to(device.name)) }
  end
  local tol = ({ f32 = 1e-5, f16 = 1e-3, bf16 = 8e-3 })[dt]
  for k = 1, #want do
    local r = tocha.compare(got[k]:to("sim"):cast("f64"), want[k]:cast("f64"), { rtol = tol, atol = tol })
    if not r.ok then error(("%s %s: %d elements differ from sim's"):format(case[1], dt, r.mismatched)) end
  end
end

local rows = {}
for _, dt in ipairs(DTYPES) do
  for _, case in ipairs(CASES) do
    check(case, dt)
    local op, shape = make(case, dt), case[3]
    local n, size = numel(shape), dt == "f32" and 4 or 2
    local sets = {}
    for s = 1, 2 do
      local x = tocha.randn(shape, { dtype = dt, device = device, seed = s })
      local set = { x = x }
      if case[1] == "bias" then
        set.b = tocha.randn({ shape[2] }, { dtype = dt, device = device, seed = s + 10 })
        set.y, set.db = tocha.empty(shape, { dtype = dt, device = device }), tocha.empty({ shape[2] }, { dtype = dt, device = device })
      else
        set.y = op:forward(x)
      end
      sets[s] = set
    end
    local dirs = case[1] == "bias" and { "forward", "backward" } or { "forward" }
    for _, dir in ipairs(dirs) do
      local launch, bytes
      if case[1] ~= "bias" then
        launch = function(k) local s = sets[k % 2 + 1]; op:forward(s.x, s.y) end
        bytes = (n + sets[1].y:numel()) * size
      elseif dir == "forward" then
        launch = function(k) local s = sets[k % 2 + 1]; op:forward(s.x, s.b, s.y) end
        bytes = (2 * n + shape[2]) * size
      else
        launch = function(k) local s = sets[k % 2 + 1]; op:backward(s.x, s.y, s.db) end
        bytes = (2 * n + shape[2]) * size
      end
      local ms = timing.time_launches(device, launch, opts.launches)
      local gbps = bytes / (ms * 1e6)
      local row = { op = case[1], dim = case[2], dir = dir, dtype = dt, shape = table.concat(shape, "x"), bytes = bytes,
        ms = ms, gbps = gbps, pct_copy = 100 * gbps / copy_gbps }
      rows[#rows + 1] = row
      print(("%-5s dim %d %-8s %-5s %-16s %9.4f ms %8.1f GB/s %6.1f%% of copy"):format(row.op, row.dim, dir, dt,
        row.shape, ms, gbps, row.pct_copy))
    end
    for s = 1, 2 do for _, t in pairs(sets[s]) do t:free() end end
  end
end

timing.write_csv(opts.out .. "/tocha.csv", { "op", "dim", "dir", "dtype", "shape", "bytes", "ms", "gbps", "pct_copy" }, rows)
local f = assert(io.open(opts.out .. "/host.csv", "w"))
f:write("measure,value\ncopy_gbps,", copy_gbps, "\n")
f:close()
print("wrote " .. opts.out .. "/tocha.csv")
