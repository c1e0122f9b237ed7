-- YOLOv8n beside PyTorch: examples/yolov8n_model.lua on cuda at 640x640 and the same
-- architecture written as a PyTorch module after Ultralytics' (spec/support/peer_yolo.py),
-- which loads tocha's parameters by their names (strictly: every name and shape of the module's
-- state dict) and runs tocha's input: boxes within 1e-4 of the largest box value, scores within
-- 1e-4 (f32, TF32 off). The BatchNorms' statistics are drawn at random, so that they count.
-- Tagged #gpu: it runs where PyTorch is, the GPU machine; pending where python3 lacks torch.
local tocha = require "tocha"
local process = require "support.process"
local peers = require "support.peers"

describe("YOLOv8n beside PyTorch #gpu", function()
  it("has Ultralytics' parameters by name and PyTorch's output at 640x640", function()
    if not peers.available("torch, numpy") then return pending("python3 with torch and numpy is not installed here") end
    local source = os.getenv("TOCHA_SOURCE_DIR") or "."
    package.path = source .. "/examples/?.lua;" .. package.path
    local yolo = require "yolov8n_model"
    local m = yolo.build { size = 640, batch = 2 }
    m:load(2, "cuda")
    m:train(false) -- inference: the BatchNorms' running statistics
    yolo.init(m, 640)
    local dict, seed = {}, 100
    for name, t in pairs(m:parameters()) do
      seed = seed + 1
      if name:find("running_mean$") then t:copy(tocha.randn(t:shape(), { seed = seed, std = 0.1, device = "cuda" }))
      elseif name:find("running_var$") or name:find("bn%.weight$") then
        t:copy(tocha.rand(t:shape(), { seed = seed, low = 0.5, high = 1.5, device = "cuda" }))
      end
      if not name:find("%.constant$") then dict[name] = t end
    end
    local dir = process.tempdir()
    tocha.save(dir .. "/yolo.safetensors", dict)
    local x = tocha.rand({ 2, 3, 640, 640 }, { seed = 7, device = "cuda" })
    tocha.save_npy(dir .. "/x.npy", x)
    tocha.save_npy(dir .. "/y.npy", m:forward({ x })[1])
    local ok, said = peers.run("peer_yolo.py", process.quote(dir))
    process.remove_tree(dir)
    print(said)
    assert.is_true(ok, said)
    assert.truthy(said:find("parameters: 3157200", 1, true), said)
  end)
end)
