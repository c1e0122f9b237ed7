-- tocha.stream: streams, the queues of work on a device, and the current stream that
-- launches, copies and event records go to.
--
--   local s = tocha.stream()            -- a new stream on the default device
--   s:use(function() up:forward(x, y) end)   -- that work queued on s
--   local done = s:record()             -- an event at this point of s
--   other:wait(done)                    -- other's later work waits for it
--
-- A stream is in use on its device for the length of s:use(fn), even when fn raises; nested
-- uses restore the one before. Streams wait for the default stream and it for them, so
-- reading a tensor from the host (which goes through the default stream) sees the work of
-- every stream. On sim, work runs when it is queued: every order holds.
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local errors = require "tocha.errors"
local event_module = require "tocha.event"
local C, check, raise = native.C, native.check, errors.raise

local M = {}
local Stream = {}
Stream.__index = Stream
Stream.__tostring = function(s) return "tocha.Stream on " .. s.device.name end

local current = {} -- device -> the Stream in use (kept alive while it is)

local function is_stream(s) return getmetatable(s) == Stream end
M.is_stream = is_stream

-- tocha.stream([device]): a new stream.
function M.new(name)
  local dev = device.get(name)
  local out = ffi.new("tocha_stream*[1]")
  check(C.tocha_stream_new(dev.handle, out))
  return setmetatable({ handle = ffi.gc(out[0], C.tocha_stream_destroy), device = dev }, Stream)
end

-- tocha.current_stream([device]): the stream in use on the device, or nil for its default one.
function M.current(name)
  return current[device.get(name)]
end

local function set(dev, s)
  check(C.tocha_device_set_stream(dev.handle, s and s.handle or nil))
  current[dev] = s
end

-- The stream an options table names ({stream = s}) for work on dev (a device table), or nil
-- when it names none; raises for anything else, and for a stream of another device (whose
-- being current would leave dev's work on dev's default stream).
function M.option(opts, dev)
  if opts == nil then return nil end
  if type(opts) ~= "table" then raise("options: expected a table {stream=}, got " .. type(opts)) end
  for k in pairs(opts) do
    if k ~= "stream" then raise(("options: unknown option %s (expected stream)"):format(errors.show(k))) end
  end
  local s = opts.stream
  if s == nil then return nil end
  if not is_stream(s) then raise("options.stream: expected a stream, got " .. type(s)) end
  if s.device ~= dev then
    raise(("options.stream: the stream is on %s, the work on %s"):format(s.device.name, dev.name))
  end
  return s
end

-- s:use(fn, ...): runs fn(...) with s the device's current stream; returns what fn returns.
function Stream:use(fn, ...)
  if type(fn) ~= "function" then raise("fn: expected a function, got " .. type(fn)) end
  local dev = self.device
  local before = current[dev]
  set(dev, self)
  local results = { pcall(fn, ...) }
  set(dev, before)
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- s:synchronize(): waits until the work queued on s has finished.
function Stream:synchronize()
  check(C.tocha_stream_synchronize(self.handle))
end

-- s:wait(event): s's later work waits for event's point (an event from tocha.event or
-- s:record, recorded on any stream of the same device).
local function check_event(event)
  if not event_module.is_event(event) then raise("event: expected an event, got " .. type(event)) end
end

function Stream:wait(event)
  check_event(event)
  check(C.tocha_stream_wait_event(self.handle, event.handle))
  return self
end

-- s:record([event]): records event (a new one by default) at this point of s; returns it.
function Stream:record(event)
  if event == nil then
    event = event_module.new(self.device.name)
  else
    check_event(event)
  end
  self:use(function() event:record() end)
  return event
end

errors.name(M.new, "stream")
errors.name(M.current, "current_stream")
errors.methods(Stream, "Stream:", is_stream)
return M
