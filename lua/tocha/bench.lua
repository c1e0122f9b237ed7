-- tocha.bench: time a piece of device work from a script as the project's benchmarks do.
--
--   local r = tocha.bench(function() up:forward(x, y) end, { reps = 50, bytes = x:nbytes() + y:nbytes() })
--   print(r.median_ms, r.min_ms, r.max_ms, r.gbps)
--
-- fn runs `warmup` times (default 3, not timed: builds, first touches), then `reps` times
-- (default 20), each between two events of the device (its queue's time; the host clock on
-- sim). On cuda a 256 MiB buffer is written between reps, so that no rep finds the last one's
-- data in L2 (flush = false leaves the cache alone). With `bytes` (what one call reads and
-- writes) the result also has gbps, at the median. Once the timed reps add up to a second, a
-- progress bar shows on stderr when stderr is a terminal. Each timed call runs inside an NVTX
-- range named `name` (default "tocha.bench"), so that nsys and ncu find it.
local ffi = require "ffi"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local raise = errors.raise

-- (pcall: a script may have declared it already)
pcall(ffi.cdef, "int isatty(int fd);")

local FLUSH_BYTES = 256 * 2 ^ 20

local function count(v, what, default, least)
  if v == nil then return default end
  if type(v) ~= "number" or v ~= math.floor(v) or v < least or v > 1e9 then
    raise(("options.%s: expected an integer >= %d, got %s"):format(what, least, errors.show(v)))
  end
  return v
end


return function(fn, opts)
  if type(fn) ~= "function" then raise("fn: expected a function, got " .. type(fn)) end
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table, got " .. type(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if not ({ warmup = true, reps = true, bytes = true, device = true, flush = true, name = true })[k] then
      raise(("options: unknown option %s (expected warmup, reps, bytes, device, flush, name)"):format(errors.show(k)))
    end
  end
  local warmup, reps = count(opts.warmup, "warmup", 3, 0), count(opts.reps, "reps", 20, 1)
  local bytes = opts.bytes
  if bytes ~= nil and (type(bytes) ~= "number" or bytes <= 0 or bytes ~= bytes) then
    raise("options.bytes: expected a positive number of bytes, got " .. errors.show(bytes))
  end
  if opts.name ~= nil and type(opts.name) ~= "string" then
    raise("options.name: expected a string, got " .. type(opts.name))
  end
  local name = opts.name or "tocha.bench"
  local nvtx = require "tocha.nvtx"
  local dev = device.get(opts.device)
  local tocha = require "tocha"
  for _ = 1, warmup do fn() end
  local flush
  if dev.kind == "cuda" and opts.flush ~= false then
    flush = tensor.empty({ FLUSH_BYTES }, { dtype = "u8", device = dev })
  end
  local tty = pcall(function() return ffi.C.isatty end) and ffi.C.isatty(2) == 1
  local spent, shown = 0, false
  local times = {}
  for r = 1, reps do
    if flush then flush:fill(r % 256) end
    local a, b = tocha.event(dev.name), tocha.event(dev.name)
    nvtx.push(name)
    a:record()
    local ok, err = pcall(fn)
    b:record()
    nvtx.pop()
    if not ok then error(err, 0) end
    times[r] = a:elapsed(b)
    spent = spent + times[r]
    if tty and (shown or spent > 1000) then
      shown = true
      local done = math.floor(30 * r / reps)
      io.stderr:write(("\r[%s%s] %d/%d"):format(("#"):rep(done), (" "):rep(30 - done), r, reps))
    end
  end
  if shown then io.stderr:write("\n") end
  if flush then flush:free() end
  local sorted = {}
  for i, t in ipairs(times) do sorted[i] = t end
  table.sort(sorted)
  local n = #sorted
  local median = n % 2 == 1 and sorted[(n + 1) / 2] or (sorted[n / 2] + sorted[n / 2 + 1]) / 2
  local result = { median_ms = median, min_ms = sorted[1], max_ms = sorted[n], reps = reps, times_ms = times }
  if bytes then result.gbps = bytes / (median * 1e6) end
  return result
end
