-- tocha.event: events on a device's queue (the host clock on sim), for timing and for ordering
-- streams. tocha.event([device]) makes one; e:record() marks the queue's point, a:elapsed(b) the
-- milliseconds between two recorded events.
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

local Event = {}
Event.__index = Event
M.Event = Event

-- An event on the device named name (default the default device).
function M.new(name)
  local dev = device.get(name)
  local out = ffi.new("tocha_event*[1]")
  check(C.tocha_event_new(dev.handle, out))
  return setmetatable({ handle = ffi.gc(out[0], C.tocha_event_destroy), device = dev }, Event)
end

function M.is_event(v) return getmetatable(v) == Event end

function Event:record()
  check(C.tocha_event_record(self.handle))
  return self
end

-- Milliseconds from self to later (waits for later to complete): both recorded events of one
-- device.
function Event:elapsed(later)
  if getmetatable(later) ~= Event then raise("later: expected an event, got " .. errors.show(later)) end
  if later.device ~= self.device then
    raise(("later: the event is on %s, self on %s"):format(later.device.name, self.device.name))
  end
  local ms = ffi.new("double[1]")
  check(C.tocha_event_elapsed_ms(self.handle, later.handle, ms))
  return ms[0]
end

errors.name(M.new, "event")
errors.methods(Event, "Event:", function(e) return getmetatable(e) == Event end)
return M
