-- tocha.memory: what each device's tensors hold, and the rule that lets the Lua collector see
-- device memory.
--
-- A tensor is a small cdata to the collector, whatever device memory stands behind it, so left
-- alone the collector runs as rarely as the Lua heap asks and dropped tensors pile up. Each
-- allocation therefore charges its bytes to its device's debt; once the debt reaches the
-- larger of what the device's tensors hold now, the Lua heap's size and 16 MiB (at most a
-- quarter of the device's memory), a full collection runs and the debt starts again. Dropped
-- tensors then give their blocks back (to the device's cache of freed blocks) within about one
-- live set's worth of allocation, as Lua's own pause gives Lua objects back within one heap's
-- worth; a loop that drops a tensor each step reuses one block. A script that stops the collector
-- (collectgarbage("stop")) stops this too; running out of device memory still collects.
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local errors = require "tocha.errors"
local C, check = native.C, native.check

local M = {}

-- The least debt that starts a collection: small tensors allocated in a loop then collect
-- every 16 MiB, not every call.
M.MIN_DEBT = 16 * 2 ^ 20

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
  local d = (debt[dev] or 0) + nbytes
  if d >= M.MIN_DEBT then
    local cap = caps[dev]
    if not cap then
      cap = math.max(M.MIN_DEBT, dev:info().memory_total / 4)
      caps[dev] = cap
    end
    local limit = math.max(M.MIN_DEBT, tonumber(read(dev).allocated_bytes), collectgarbage("count") * 1024)
    if d >= math.min(limit, cap) and collectgarbage("isrunning") then
      collectgarbage("collect")
      d = 0
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
