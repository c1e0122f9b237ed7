-- bench/timing.lua: device timing and the CSV output shared by the benchmarks.
local tocha = require "tocha"
local ffi = require "ffi"

local M = {}

ffi.cdef "struct tocha_timing_timespec { long s; long ns; }; int clock_gettime(int clk, struct tocha_timing_timespec *ts);"
local ts = ffi.new("struct tocha_timing_timespec")

-- The monotonic clock in microseconds.
function M.now_us()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.s) * 1e6 + tonumber(ts.ns) / 1e3
end

-- Host microseconds per call of call() over n calls in batches of `batch` (default 250), sync()
-- after each batch outside the timed part, so that the launch queue never fills and no call
-- waits for the GPU (a call of several launches takes a smaller batch).
function M.host_us_per_call(call, sync, n, batch)
  batch = batch or 250
  local batches = math.max(1, math.floor(n / batch))
  local spent = 0
  for _ = 1, batches do
    local b0 = M.now_us()
    for _ = 1, batch do call() end
    spent = spent + M.now_us() - b0
    sync()
  end
  return spent / (batches * batch)
end

-- The median of a list of numbers (sorts it).
function M.median(list)
  table.sort(list)
  local n = #list
  return n % 2 == 1 and list[(n + 1) / 2] or (list[n / 2] + list[n / 2 + 1]) / 2
end

-- A kernel that keeps the device busy for `cycles` clock cycles. Launched before each timed
-- call, it makes the call's launches wait in the queue behind it, so that the events around
-- the call time the device's work alone: without it, a call whose host side (argument checks,
-- planning, allocation) takes longer than its kernels is timed at the host's pace.
-- bench/launch_floor.lua measures the host side on its own.
local HOLD_SOURCE = [[
template <int UNUSED> __device__ void hold_device(unsigned char *anchor, long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
]]
-- 2 ms at the H200's 1.98 GHz: longer than any case's host side.
M.HOLD_CYCLES = 4000000

local holds = {}
local function hold(device)
  if device.kind ~= "cuda" then return end
  local h = holds[device.name]
  if not h then
    h = { kernel = tocha.kernel { source = HOLD_SOURCE, name = "hold_device", template_args = "0",
      params = "u8* anchor, i64 cycles" }, anchor = tocha.empty({ 16 }, { dtype = "u8", device = device }) }
    holds[device.name] = h
  end
  h.kernel:launch(1, 1, h.anchor, M.HOLD_CYCLES)
end

-- Median milliseconds of fn(k) over n launches on device, each between two events with the
-- device held busy just before (see hold_device), after a warm-up of five.
function M.time_launches(device, fn, n)
  for k = 1, 5 do fn(k) end
  local starts, stops = {}, {}
  for k = 1, n do starts[k], stops[k] = tocha.event(device), tocha.event(device) end
  for k = 1, n do
    hold(device)
    starts[k]:record()
    fn(k)
    stops[k]:record()
  end
  local times = {}
  for k = 1, n do times[k] = starts[k]:elapsed(stops[k]) end
  return M.median(times)
end

-- The number of elements of a shape (a list of sizes).
function M.numel(shape)
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  return n
end

-- device's copy bandwidth for a benchmark's % of copy, printed as its header says it: measured
-- on a GPU, 1 on sim (whose times mean nothing; a run there checks the script).
function M.copy_rate(device)
  local gbps = device.kind == "sim" and 1 or M.copy_bandwidth(device)
  print(("device-to-device copy: %.1f GB/s (read + written)"):format(gbps))
  return gbps
end

-- device's device-to-device copy bandwidth in GB/s, bytes read plus written, over 1 GiB.
function M.copy_bandwidth(device)
  local n = 256 * 2 ^ 20 -- 1 GiB of f32
  local src = tocha.empty({ n }, { device = device })
  local dst = tocha.empty({ n }, { device = device })
  src:fill(1)
  local ms = M.time_launches(device, function() dst:copy(src) end, 20)
  src:free(); dst:free()
  return 2 * n * 4 / (ms * 1e6)
end

-- The command line of a benchmark: "--name value" for each key of defaults whose default is a
-- number or a string (numbers converted), "--name" alone for each whose default is false.
-- Returns a table of the values; an unknown or malformed argument is an error.
-- Whether a case or family named `name` is selected by `only`: a comma-separated list of Lua
-- patterns (any one matching), or "" for every case.
function M.selected(name, only)
  if only == "" then return true end
  for pattern in only:gmatch("[^,]+") do
    if name:find(pattern) then return true end
  end
  return false
end

function M.arguments(args, defaults)
  local opts = {}
  for k, v in pairs(defaults) do opts[k] = v end
  local i = 1
  while i <= #args do
    local name = args[i]:match("^%-%-([%w_]+)$")
    local default = name and defaults[name]
    if default == nil then error("unknown argument " .. args[i]) end
    if default == false then
      opts[name] = true
    else
      local v = args[i + 1]
      if v == nil then error("--" .. name .. " needs a value") end
      if type(default) == "number" then
        v = tonumber(v)
        if not v then error("--" .. name .. " needs a number") end
      end
      opts[name] = v
      i = i + 1
    end
    i = i + 1
  end
  return opts
end

-- The devices a benchmark over several runs on: the comma-separated names of list (its
-- --devices), else every cuda device, else the simulator's sim and sim:1.
function M.device_names(list)
  local names = {}
  if list ~= "" then
    for n in list:gmatch("[^,]+") do names[#names + 1] = n end
    return names
  end
  for _, d in ipairs(tocha.devices()) do if d.kind == "cuda" then names[#names + 1] = d.name end end
  if #names == 0 then names = { "sim", "sim:1" } end
  return names
end

-- A CSV field: quoted (RFC 4180) when it holds a comma, a quote or a line break.
local function csv_field(v)
  local text = tostring(v)
  if text:find('[,"\n]') then return '"' .. text:gsub('"', '""') .. '"' end
  return text
end

-- Writes rows (tables) to path as CSV: a header of columns, then each row's values in order.
function M.write_csv(path, columns, rows)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(columns, ","), "\n")
  for _, r in ipairs(rows) do
    local out = {}
    for k, c in ipairs(columns) do out[k] = csv_field(r[c]) end
    f:write(table.concat(out, ","), "\n")
  end
  f:close()
end

return M
