-- tocha.memory: what each device's tensors hold, and the rule that lets the Lua collector see
-- device memory.
--
-- A tensor is a small cdata to the collector, whatever device memory stands behind it, so left
-- alone the collector runs as rarely as the Lua heap asks and dropped tensors pile up. Each
-- allocation therefore charges its bytes to its device's debt, and once the debt reaches a
-- limit a full collection runs and the debt starts again. The limit weighs memory against the
-- collection's cost, which is the same whatever it frees (about 70 us for tocha's own heap on
-- a current host, more for a larger one):
--   * at least what the device's tensors hold now (one live set's worth of garbage, as Lua's
--     own pause allows one heap's worth), and 16 times the Lua heap (a larger heap costs more
--     to collect);
--   * at least FLOOR_BYTES = 16 MiB, and for allocations under 1 MiB more: 16 MiB x (1 MiB /
--     the allocation's size), up to 256 MiB (64 MiB for 256 KiB tensors): small tensors come
--     many to a step, and collecting every 64 of them would cost a microsecond each;
--   * at most a quarter of the device's memory.
-- A loop that drops a 16 MiB tensor each step then reuses about one block; one that drops
-- 256 KiB tensors collects every 256 steps. A script that stops the collector
-- (collectgarbage("stop")) stops this too; running out of device memory still collects.
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local errors = require "tocha.errors"
local C, check = native.C, native.check

local M = {}

-- The least debt that starts a collection (see the top of this file).
M.FLOOR_BYTES = 16 * 2 ^ 20
local SMALL_FLOOR_CAP = 256 * 2 ^ 20
local HEAP_FACTOR = 16

local stats_buffer = ffi.new("tocha_memory_stats")
local debt, caps = {}, {}

local function read(dev)
  check(C.tocha_memory_stats_get(dev.handle, stats_buffer))
  return stats_buffer
end

-- tocha.memory.stats([device]): the device's figures, in bytes and counts: allocated (live
-- tensors), peak (the most allocated since the start or reset_peak), reserved (held from the
-- device: live blocks, their padding and cached ones), cached (freed blocks kept for reuse),
-- allocations, frees, cache_hits (allocations served from a cached block).
function M.stats(name)
  local s = read(device.get(name))
  return { allocated = tonumber(s.allocated_bytes), peak = tonumber(s.peak_allocated_bytes),
    reserved = tonumber(s.reserved_bytes), cached = tonumber(s.cached_bytes), allocations = tonumber(s.allocations),
    frees = tonumber(s.frees), cache_hits = tonumber(s.cache_hits) }
end

-- tocha.memory.empty_cache([device]): a full collection (so that tensors nothing refers to
-- give their blocks back), then the cached blocks go back to the device.
function M.empty_cache(name)
  local dev = device.get(name)
  collectgarbage("collect")
  check(C.tocha_memory_empty_cache(dev.handle))
end

-- tocha.memory.reset_peak([device]): peak starts again from what is allocated now.
function M.reset_peak(name)
  check(C.tocha_memory_reset_peak(device.get(name).handle))
end

-- Charges an allocation of nbytes on dev (a device table) to its debt, collecting first when
-- the debt has reached its limit (see the top of this file). Called before the allocation, so
-- that the blocks it frees can serve it.
function M.charge(dev, nbytes)
  local floor = M.FLOOR_BYTES
  local d = (debt[dev] or 0) + nbytes
  if d >= floor then
    -- under 1 MiB: 16 MiB x (1 MiB / nbytes), continuous at 1 MiB
    if nbytes < floor / 16 then floor = math.min(SMALL_FLOOR_CAP, floor * (floor / 16) / math.max(nbytes, 1)) end
    local cap = caps[dev]
    if not cap then
      cap = math.max(M.FLOOR_BYTES, dev:info().memory_total / 4)
      caps[dev] = cap
    end
    if d >= math.min(floor, cap) then
      local limit = math.max(floor, tonumber(read(dev).allocated_bytes), HEAP_FACTOR * 1024 * collectgarbage("count"))
      if d >= math.min(limit, cap) and collectgarbage("isrunning") then
        collectgarbage("collect")
        d = 0
      end
    end
  end
  debt[dev] = d
end

-- Tensors allocated on a device while a graph is captured, kept for as long as the graph.
local keeping = {}

-- M.keep_allocations(dev): starts keeping dev's new tensors; returns the list they go to.
-- M.keep_allocations(dev, false): stops.
function M.keep_allocations(dev, on)
  if on == false then keeping[dev] = nil; return nil end
  keeping[dev] = {}
  return keeping[dev]
end

-- Called with each new tensor t on dev.
function M.allocated(dev, t)
  local list = keeping[dev]
  if list then list[#list + 1] = t end
end

errors.name(M.stats, "memory.stats")
errors.name(M.empty_cache, "memory.empty_cache")
errors.name(M.reset_peak, "memory.reset_peak")

return M
