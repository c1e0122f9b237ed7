-- Real networks beside PyTorch, off the GPU: on sim, against PyTorch on the CPU (Debian's
-- python3-torch and python3-torchvision, which scripts/install-deps.sh installs), at small
-- sizes so that CI runs them:
--   torchvision's ResNet-18, MobileNetV3-Small, MobileNetV2, ConvNeXt-Tiny, DenseNet-121, LR-ASPP
--   (segmentation), Swin-T, a stack of generator and decoder layers and EfficientNet-B0,
--   YOLOv8n (peer_yolo.py's module, its Detect head's decoding included) and a small
--   VisionTransformer (torchvision's: class token, attention, the token gathered) and a text
--   transformer over int64 token ids (nn.Embedding, nn.TransformerEncoder), a BERT-style
--   encoder with an int64 attention mask and nanoGPT's GPT (a causal masked_fill), randomly
--   initialised and exported to ONNX by PyTorch itself (spec/support/peer_onnx.py), imported
--   and fused by tocha.onnx.load: every output within 1e-4 of the largest (f32, 64x64 images);
--   YOLOv8n (examples/yolov8n_model.lua) beside the same architecture written as a PyTorch
--   module after Ultralytics' (spec/support/peer_yolo.py), which loads tocha's parameters by
--   name, strictly;
--   examples/train_digits.lua's first 50 steps replayed by PyTorch from the same initial
--   parameters, batches and learning rates (spec/support/peer_train.py): each loss within 1e-4;
--   examples/swap_op.lua on the exported ResNet-18: its max pool swapped for a kernel of one's
--   own (m:replace), the same logits, and m:profile's table.
-- The #gpu peer specs run the same on cuda at full size (peer_onnx_spec, peer_yolo_spec,
-- peer_train_spec). Pending where no python3 has torch and torchvision.
local tocha = require "tocha"
local process = require "support.process"
local peers = require "support.peers"
local runs = require "support.peer_runs"

local source = os.getenv("TOCHA_SOURCE_DIR") or "."

describe("networks and training beside PyTorch on the CPU", function()
  local have
  setup(function() have = peers.available("torch, torchvision, numpy") end)

  it("runs torchvision's ResNet-18, MobileNetV3-Small, MobileNetV2, ConvNeXt-Tiny, DenseNet-121, LR-ASPP, Swin-T, a stack of generator layers, EfficientNet-B0, YOLOv8n, a ViT, a text transformer, a BERT and a GPT as exported by PyTorch",
    function()
    if not have then return pending("no python3 with torch and torchvision here") end
    local dir = process.tempdir()
    local ok, said = peers.run("peer_onnx.py", process.quote(dir), 64, 2)
    assert.is_true(ok, said)
    for _, name in ipairs(runs.ONNX_NETWORKS) do
      assert.truthy(said:find(name .. ": exported", 1, true), said)
      local inputs = runs.onnx_inputs(dir, name, "sim")
      local m = tocha.onnx.load(("%s/%s.onnx"):format(dir, name), { batch_size = 2, device = "sim" })
      local err = runs.relative(m:forward(inputs)[1], tocha.load_npy(("%s/%s_out.npy"):format(dir, name)))
      assert.is_true(err <= 1e-4, ("%s: logits differ by %.3g of the largest"):format(name, err))
    end
    -- the experiment of examples/swap_op.lua on it: the max pool swapped for a kernel of one's own
    local out, err, status = process.run { args = { source .. "/examples/swap_op.lua", dir .. "/resnet18.onnx", "--size", "64",
      "--batch", "2" }, env = { TOCHA_DEVICE = "sim" } }
    assert.are.equal(0, status, err .. out)
    assert.truthy(out:find("node /maxpool/MaxPool (maxpool2d) swapped for my_max_pool: outputs differ by at most 0", 1, true), out)
    assert.truthy(out:find("\n/maxpool/MaxPool +my_max_pool +1 "), out)
    process.remove_tree(dir)
  end)

  it("runs YOLOv8n as the same architecture in PyTorch does, from the same parameters by name", function()
    if not have then return pending("no python3 with torch and torchvision here") end
    local ok, said = runs.yolo("sim", 64)
    assert.is_true(ok, said)
    assert.truthy(said:find("parameters: 3157200", 1, true), said)
  end)

  it("trains as PyTorch does: train_digits.lua's first 50 losses", function()
    if not have then return pending("no python3 with torch and torchvision here") end
    local ok, said = runs.train("sim")
    assert.is_true(ok, said)
    assert.truthy(said:find("worst relative difference over 50 steps", 1, true), said)
  end)
end)
