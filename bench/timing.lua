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

-- Median milliseconds of fn(k) over n launches on device, each between two events, after a
-- warm-up of five.
function M.time_launches(device, fn, n)
  for k = 1, 5 do fn(k) end
  local starts, stops = {}, {}
  for k = 1, n do starts[k], stops[k] = tocha.event(device), tocha.event(device) end
  for k = 1, n do
    starts[k]:record()
    fn(k)
    stops[k]:record()
  end
  local times = {}
  for k = 1, n do times[k] = starts[k]:elapsed(stops[k]) end
  return M.median(times)
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
