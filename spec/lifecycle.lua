-- lifecycle.lua (run by the tocha executable): creates, frees and collects tensors (empty ones
-- and views too) and kernels 10,000 times and checks that host and device memory return to
-- where they started.
-- Prints "N passed, N failed"; exits 1 on a failure.
local tocha = require "tocha"

local ROUNDS = tonumber(arg and arg[1]) or 10000

-- Resident host memory in bytes (from /proc/self/statm).
local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local pages = tonumber(f:read("*a"):match("^%d+%s+(%d+)"))
  f:close()
  return pages * 4096
end

local function device_free(dev) return tocha.device(dev):info().memory_free end

local passed, failed = 0, 0
local function check(name, ok, detail)
  if ok then passed = passed + 1; print("ok: " .. name)
  else failed = failed + 1; print("FAILED: " .. name .. ": " .. detail) end
end

local devices = { "sim" }
for _, d in ipairs(tocha.devices()) do if d.kind == "cuda" then devices[#devices + 1] = d.name end end

for _, dev in ipairs(devices) do
  -- Warm up: build every kernel used below, so that the cache's one-time entries are made.
  local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
  local x = tocha.rand({ 1, 2, 8, 8 }, { device = dev, seed = 1 })
  up:backward(x, up:forward(x))
  collectgarbage("collect")
  local rss0, free0 = rss(), device_free(dev)
  local rss_half

  for i = 1, ROUNDS do
    local t = tocha.zeros({ 64, 64 }, { device = dev })          -- 16 KiB each
    local k = tocha.UpsampleNearest2dForward.new(2, 2, 64)
    local y = k:forward(x)
    local e = tocha.empty({ 64, 0 }, { device = dev })         -- empty: no device block
    local ev = t:narrow(2, 65, 0)                              -- an empty view of t
    if i % 2 == 0 then t:free(); y:free(); e:free(); ev:free() end -- half freed, half collected
    if i % 100 == 0 then collectgarbage("collect") end
    if i == math.floor(ROUNDS / 2) then rss_half = rss() end
  end
  collectgarbage("collect")
  collectgarbage("collect")
  local rss1, free1 = rss(), device_free(dev)
  -- 10,000 rounds allocate about 160 MiB of tensors (and 640 MiB of kernel sources). Half
  -- of them wait for the collector, so resident memory peaks wherever the garbage of one
  -- cycle does: collecting every 100 rounds bounds that garbage to a few MiB (with 1,000
  -- rounds between collections, a peak late in the run reads as 9 MiB of growth under
  -- ASan). The first rounds grow the allocator's pools by 6-8 MiB, which is slack, not a
  -- leak; so the check is the second half of the rounds against the first, where a leak of
  -- every tensor would be 80 MiB, and the whole run's growth is only printed.
  local grown, total = rss1 - rss_half, rss1 - rss0
  check(("%s: host memory returns (grew %d KiB in the second half, %d KiB in all)"):format(dev,
      math.floor(grown / 1024), math.floor(total / 1024)), grown < 8 * 2 ^ 20,
    ("resident memory grew by %d KiB in the second half of the rounds"):format(math.floor(grown / 1024)))
  if dev ~= "sim" then
    check(dev .. ": device memory returns", free1 >= free0 - 2 * 2 ^ 20,
      ("free device memory went from %d to %d"):format(free0, free1))
  end
end
print(("%d passed, %d failed"):format(passed, failed))
-- A failure exits 1 after closing the Lua state (so that every object is finalized and a leak
-- check at exit reports only real leaks) and with stdout flushed.
io.stdout:flush()
if failed > 0 then os.exit(1, true) end
