-- The runs the network peer specs share (peer_networks_spec on sim, peer_onnx_spec,
-- peer_yolo_spec and peer_train_spec on cuda): each does tocha's half on a device and hands
-- the rest to its Python script (spec/support/peer_*.py).
local tocha = require "tocha"
local process = require "support.process"
local peers = require "support.peers"
local ref = require "support.reference"

local M = {}

-- The networks spec/support/peer_onnx.py exports (torchvision's and timm's classifiers, LR-ASPP's
-- per-pixel scores, a stack of generator layers, YOLOv8n as peer_yolo.py writes it, its
-- detections [batch, 84, anchors] the output, and a small torchvision VisionTransformer).
M.ONNX_NETWORKS = { "resnet18", "mobilenet_v3_small", "mobilenet_v2", "convnext_tiny", "densenet121", "lraspp", "swin_t",
  "blocks", "efficientnet_b0", "yolov8n", "vit", "text", "bert", "gpt", "recurrent" }

-- A network's inputs as peer_onnx.py saved them in dir: <name>_in.npy, then <name>_in2.npy, ...
-- where there are more (bert's mask), on device.
function M.onnx_inputs(dir, name, device)
  local tocha = require "tocha"
  local inputs = { tocha.load_npy(("%s/%s_in.npy"):format(dir, name), { device = device }) }
  while true do
    local more = ("%s/%s_in%d.npy"):format(dir, name, #inputs + 1)
    local f = io.open(more, "rb")
    if not f then return inputs end
    f:close()
    inputs[#inputs + 1] = tocha.load_npy(more, { device = device })
  end
end

local source = os.getenv("TOCHA_SOURCE_DIR") or "."

-- The largest difference of got from want over want's largest magnitude (inf for a NaN).
function M.relative(got, want)
  local g, w = ref.values(got), ref.values(want)
  assert(#w == #g, ("%d elements, expected %d"):format(#g, #w))
  local big, worst = 0, 0
  for i = 1, #w do big = math.max(big, math.abs(w[i])) end
  for i = 1, #w do
    local d = math.abs(g[i] - w[i])
    if d ~= d then return math.huge end
    worst = math.max(worst, d)
  end
  return worst / big
end

-- examples/yolov8n_model.lua at size x size, batch 2, on device, in inference with its
-- BatchNorms' statistics drawn at random (so that they count), beside peer_yolo.py: its
-- parameters, an input and tocha's output written to a folder the script reads. Returns
-- whether the script agreed and what it said.
function M.yolo(device, size)
  package.path = source .. "/examples/?.lua;" .. package.path
  local yolo = require "yolov8n_model"
  local m = yolo.build { size = size, batch = 2 }
  m:load(2, device)
  m:train(false)
  yolo.init(m, size)
  local dict, seed = {}, 100
  for name, t in pairs(m:parameters()) do
    seed = seed + 1
    if name:find("running_mean$") then t:copy(tocha.randn(t:shape(), { seed = seed, std = 0.1, device = device }))
    elseif name:find("running_var$") or name:find("bn%.weight$") then
      t:copy(tocha.rand(t:shape(), { seed = seed, low = 0.5, high = 1.5, device = device }))
    end
    if not name:find("%.constant$") then dict[name] = t end
  end
  local dir = process.tempdir()
  tocha.save(dir .. "/yolo.safetensors", dict)
  local x = tocha.rand({ 2, 3, size, size }, { seed = 7, device = device })
  tocha.save_npy(dir .. "/x.npy", x)
  tocha.save_npy(dir .. "/y.npy", m:forward({ x })[1])
  local ok, said = peers.run("peer_yolo.py", process.quote(dir))
  process.remove_tree(dir)
  return ok, said
end

-- examples/train_digits.lua's first 50 steps on device (TOCHA_DEVICE), replayed by
-- peer_train.py. Returns whether the losses agreed and what the script said.
function M.train(device)
  local run = process.tempdir()
  local out, err, status = process.run { args = { source .. "/examples/train_digits.lua", "--steps", "50", "--out", run },
    env = { TOCHA_DEVICE = device } }
  assert(status == 0, err .. out)
  local ok, said = peers.run("peer_train.py", process.quote(run), process.quote(source .. "/examples/data"), 50)
  process.remove_tree(run)
  return ok, said
end

return M
