-- tocha.device: the devices of this process (cuda:N and the simulator's sim, sim:1, ...).
-- A device is a small table: name, kind ("cuda" or "sim"), and the C handle in .handle.
local ffi = require "ffi"
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local C, check = native.C, native.check

local M = {}
local MAX_DEVICES = 24 -- 16 GPUs and 8 sim devices (host/src/internal.h)

-- The Device class and the one Device per handle live in the Lua registry, not in this module:
-- a module loaded again (busted clears package.loaded between spec files) must hand out the
-- very tables the first load did, since tensors keep the first load's methods (an FFI metatype
-- is set once) and those check devices by their metatable and compare them by identity.
local registry = debug.getregistry()
local state = registry["tocha.device"] or { Device = {}, by_handle = {} }
registry["tocha.device"] = state
local by_handle = state.by_handle
local Device = state.Device
Device.__index = Device
Device.__tostring = function(d) return "tocha.Device " .. d.name end

local function wrap(handle)
  local key = tonumber(ffi.cast("uintptr_t", handle)) -- exact: addresses are below 2^53
  local d = by_handle[key]
  if d then return d end
  local info = ffi.new("tocha_device_info")
  check(C.tocha_device_info_get(handle, info))
  d = setmetatable({
    handle = handle,
    name = ffi.string(info.name),
    kind = info.kind == 0 and "cuda" or "sim",
    product = ffi.string(info.product),
    target = ffi.string(info.target),
    compute_capability = info.kind == 0 and { info.cc_major, info.cc_minor } or nil,
    multiprocessors = info.multiprocessors,
  }, Device)
  by_handle[key] = d
  return d
end
M.wrap = wrap

-- Current figures: name, product, kind, target, compute capability, memory free and total.
function Device:info()
  local info = ffi.new("tocha_device_info")
  check(C.tocha_device_info_get(self.handle, info))
  return {
    name = self.name, product = self.product, kind = self.kind, target = self.target,
    compute_capability = self.compute_capability and
      (self.compute_capability[1] .. "." .. self.compute_capability[2]) or nil,
    multiprocessors = self.multiprocessors,
    memory_free = tonumber(info.memory_free), memory_total = tonumber(info.memory_total),
  }
end

-- Waits for all work queued on the device.
function Device:synchronize()
  check(C.tocha_device_synchronize(self.handle))
end

-- Every device this process can use.
function M.list()
  local out, count = ffi.new("tocha_device*[?]", MAX_DEVICES), ffi.new("int[1]")
  check(C.tocha_device_list(out, MAX_DEVICES, count))
  local list = {}
  for i = 0, math.min(count[0], MAX_DEVICES) - 1 do list[#list + 1] = wrap(out[i]) end
  return list
end

-- The device called name ("cuda", "cuda:N", "sim", "sim:N"); nil or a Device gives the default
-- / itself.
-- Raises "device: ..." (tocha.errors.raise) when it is unknown or unavailable.
function M.get(name)
  if getmetatable(name) == Device then return name end
  local out = ffi.new("tocha_device*[1]")
  if type(name) ~= "nil" and type(name) ~= "string" then -- (a NULL pointer equals nil)
    errors.raise(("device: expected a device name (cuda, cuda:N, sim, sim:N), got %s"):format(type(name)))
  end
  check(C.tocha_device_get(name, out))
  return wrap(out[0])
end

-- The default device and why it was chosen.
function M.default()
  local out = ffi.new("tocha_device*[1]")
  check(C.tocha_device_default(out))
  return wrap(out[0]), ffi.string(C.tocha_device_default_reason())
end

M.Device = Device
errors.name(M.list, "devices")
errors.name(M.default, "default_device")
errors.methods(Device, "Device:", function(d) return getmetatable(d) == Device end)
return M
