-- YOLOv8n beside PyTorch: examples/yolov8n_model.lua on cuda at 640x640 and the same
-- architecture written as a PyTorch module after Ultralytics' (spec/support/peer_yolo.py),
-- which loads tocha's parameters by their names (strictly: every name and shape of the module's
-- state dict) and runs tocha's input: boxes within 1e-4 of the largest box value, scores within
-- 1e-4 (f32, TF32 off). The BatchNorms' statistics are drawn at random, so that they count.
-- Tagged #gpu: it runs where PyTorch is, the GPU machine; pending where python3 lacks torch.
local peers = require "support.peers"
local runs = require "support.peer_runs"

describe("YOLOv8n beside PyTorch #gpu", function()
  it("has Ultralytics' parameters by name and PyTorch's output at 640x640", function()
    if not peers.available("torch, numpy") then return pending("python3 with torch and numpy is not installed here") end
    local ok, said = runs.yolo("cuda", 640)
    print(said)
    assert.is_true(ok, said)
    assert.truthy(said:find("parameters: 3157200", 1, true), said)
  end)
end)
