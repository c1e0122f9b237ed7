-- tocha.graph: work captured once and replayed.
--
--   local g = tocha.graph(function() return up:forward(x) end)   -- captured, not run
--   g:replay()                                                   -- runs it: g.outputs[1] is y
--
-- tocha.graph(fn [, device]) runs fn with a new stream of the device current and that stream
-- capturing: the launches and copies fn queues are recorded, not run (cuda: the driver's
-- stream capture; sim: tocha records them). g:replay() queues them again, on the current
-- stream, on the same tensors. Tensors fn allocates are kept by g (g.outputs holds what fn
-- returns), so they stay valid for every replay; tensors made before the capture must be kept
-- alive by the caller as long as g is replayed. During the capture the collector does not run,
-- and the device refuses synchronizing, host reads and writes, event records and kernels not yet
-- loaded on it (launch a kernel once before capturing it).
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local stream = require "tocha.stream"
local memory = require "tocha.memory"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local M = {}
local Graph = {}
Graph.__index = Graph
Graph.__tostring = function(g) return "tocha.Graph on " .. g.device.name end

local function is_graph(g) return getmetatable(g) == Graph end

function M.capture(fn, name)
  if type(fn) ~= "function" then raise("fn: expected a function, got " .. type(fn)) end
  local dev = device.get(name)
  local s = stream.new(dev.name)
  check(C.tocha_graph_capture_begin(s.handle))
  local collecting = collectgarbage("isrunning")
  collectgarbage("stop")
  local kept = memory.keep_allocations(dev)
  local results = { pcall(s.use, s, fn) }
  memory.keep_allocations(dev, false)
  if collecting then collectgarbage("restart") end
  local out = ffi.new("tocha_graph*[1]")
  local st = C.tocha_graph_capture_end(s.handle, out)
  if not results[1] then
    if st == 0 then C.tocha_graph_destroy(out[0]) end
    error(results[2], 0)
  end
  check(st)
  return setmetatable({ handle = ffi.gc(out[0], C.tocha_graph_destroy), device = dev, stream = s,
    outputs = { unpack(results, 2, table.maxn(results)) }, tensors = kept }, Graph)
end

-- g:replay(): queues the captured work again on the current stream; returns g.
function Graph:replay()
  check(C.tocha_graph_replay(self.handle))
  return self
end

errors.name(M.capture, "graph")
errors.methods(Graph, "Graph:", is_graph)
return M
