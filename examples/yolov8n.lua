-- yolov8n.lua: the YOLOv8n detector's architecture (examples/yolov8n_model.lua) built, loaded
-- and run on a random image: its parameter count (Ultralytics' 3,157,200), the output's shape
-- and ranges, and the time of a forward and of a replay of its captured graph.
--
--   tocha examples/yolov8n.lua [--size 640] [--batch 1]
local tocha = require "tocha"

package.path = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local yolo = require "yolov8n_model"

local size, batch = 640, 1
local i = 1
while arg and arg[i] do
  if arg[i] == "--size" then size = assert(tonumber(arg[i + 1]), "--size: expected a number") i = i + 2
  elseif arg[i] == "--batch" then batch = assert(tonumber(arg[i + 1]), "--batch: expected a number") i = i + 2
  else error("yolov8n.lua: unknown argument " .. arg[i] .. " (expected --size N, --batch N)") end
end

local device = tocha.default_device()
local m, facts = yolo.build { size = size, batch = batch }
m:load(batch)
m:train(false) -- inference: the BatchNorms use their running statistics
yolo.init(m, size)
local count = yolo.parameter_count(m)
print(("YOLOv8n on %s: %d parameters, %d nodes, images [%d, 3, %d, %d], %d anchors"):format(device.name, count,
  #m.order, batch, size, size, facts.anchors))

local x = tocha.rand({ batch, 3, size, size }, { seed = 1 })
local y = m:forward({ x })[1]
local v = y:to_table()
local lo, hi, slo, shi = math.huge, -math.huge, math.huge, -math.huge
for bi = 1, batch do
  for a = 1, facts.anchors do
    for k = 1, 4 do lo, hi = math.min(lo, v[bi][k][a]), math.max(hi, v[bi][k][a]) end
    for k = 5, 84 do slo, shi = math.min(slo, v[bi][k][a]), math.max(shi, v[bi][k][a]) end
  end
end
print(("output [%s]: boxes (x, y, w, h) in [%.4g, %.4g] pixels, scores in [%.4g, %.4g]"):format(
  table.concat(y:shape(), ", "), lo, hi, slo, shi))
local forward_ms = tocha.time(function() m:forward({ x }) end)
local c = m:capture()
c:replay({ x })
local replay_ms = tocha.time(function() c:replay({ x }) end)
print(("forward %.3f ms, graph replay %.3f ms"):format(forward_ms, replay_ms))
