-- Networks no one here wrote: torchvision's ResNet-18, MobileNetV3-Small, MobileNetV2,
-- ConvNeXt-Tiny, DenseNet-121, LR-ASPP (segmentation) and Swin-T, a stack of generator and
-- decoder layers as torch.nn writes them (GroupNorm, bilinear and bicubic resizing, padding,
-- InstanceNorm, LeakyReLU), timm's EfficientNet-B0, YOLOv8n (spec/support/peer_yolo.py's module
-- after Ultralytics'), a small torchvision VisionTransformer, a text transformer, a BERT, a GPT
-- and a sequence model of nn.LSTM and nn.GRU, randomly initialised and
-- exported to ONNX by PyTorch itself (spec/support/peer_onnx.py), imported with
-- tocha.onnx.load and run on cuda: every logit within 1e-4 of the largest in f32 (PyTorch's,
-- TF32 off), and within the stated tolerances in f16 (1e-2) and bf16 (5e-2). Tagged #gpu: it
-- runs where PyTorch is, the GPU machine; pending where python3 lacks torch or torchvision.
local tocha = require "tocha"
local process = require "support.process"
local peers = require "support.peers"
local runs = require "support.peer_runs"

describe("networks exported by PyTorch #gpu", function()
  it("run as PyTorch runs them: ResNet-18, MobileNetV3-Small, MobileNetV2, ConvNeXt-Tiny, DenseNet-121, LR-ASPP, Swin-T, a stack of generator layers, EfficientNet-B0, YOLOv8n, ViT, a text transformer, a BERT, a GPT, an LSTM and GRU sequence model", function()
    if not peers.available("torch, torchvision, numpy") then
      return pending("python3 with torch, torchvision and numpy is not installed here")
    end
    local dir = process.tempdir()
    local ok, said = peers.run("peer_onnx.py", process.quote(dir))
    assert.is_true(ok, said)
    local ran = 0
    for _, name in ipairs(runs.ONNX_NETWORKS) do
      if said:find(name .. ": exported", 1, true) then
        local inputs = runs.onnx_inputs(dir, name, "cuda")
        local want = tocha.load_npy(("%s/%s_out.npy"):format(dir, name))
        for dt, tol in pairs({ f32 = 1e-4, f16 = 1e-2, bf16 = 5e-2 }) do
          local m = tocha.onnx.load(("%s/%s.onnx"):format(dir, name), { batch_size = 2, device = "cuda", dtype = dt })
          local given = {}
          for i, x in ipairs(inputs) do -- (ids and masks stay integers)
            given[i] = ({ i64 = true, i32 = true, u8 = true })[x:dtype()] and x or x:cast(dt)
          end
          local err = runs.relative(m:forward(given)[1], want)
          print(("[peer onnx] %s %s: largest difference %.3g of the largest logit"):format(name, dt, err))
          assert.is_true(err <= tol, ("%s %s: %.3g > %g"):format(name, dt, err, tol))
        end
        ran = ran + 1
      end
    end
    process.remove_tree(dir)
    assert.is_true(ran >= 2, said)
  end)
end)
