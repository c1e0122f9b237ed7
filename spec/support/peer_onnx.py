"""The Python side of spec/peer_onnx_spec.lua: networks no one here wrote, exported to ONNX by
PyTorch itself, with PyTorch's outputs on the same random input.

    python3 peer_onnx.py DIR [SIZE [BATCH]]

For torchvision's ResNet-18, MobileNetV3-Small, MobileNetV2, ConvNeXt-Tiny, DenseNet-121 (its
average pools exported as a Pad and an AveragePool), LR-ASPP (a segmentation network: bilinear
Resize), Swin-T (windowed attention: shifted windows by Slice and Concat, its masks and
relative position bias as constant arithmetic) and `blocks` (a stack of generator and decoder
layers: GroupNorm, bilinear upsampling, reflection and zero padding, InstanceNorm, LeakyReLU), timm's EfficientNet-B0 (torchvision's where timm is not installed) and YOLOv8n (peer_yolo.py's module,
its output the decoded boxes and class scores; SIZE a multiple of 32) and a small torchvision
VisionTransformer (vit: 2 layers, patches of 16), each randomly
initialised from seed 0 (its BatchNorms' statistics and affine too), in eval mode, writes
DIR/<name>.onnx (torch.onnx.export, opset 17, the TorchScript exporter), DIR/<name>_in.npy (a
[BATCH, 3, SIZE, SIZE] f32 input from seed 1; 2 and 224 by default) and DIR/<name>_out.npy
(PyTorch's logits in f32, on cuda with TF32 off where there is a GPU, else on the CPU, as
float64). Prints a line a network. PEER_EXPORTER=dynamo exports with torch.export's exporter
(dynamo=True, opset 18; PyTorch 2.9's default) instead.
"""
import os
import sys

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
out = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 224
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 2
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a check off the GPU machine


def networks():
    import torchvision
    yield "resnet18", lambda: torchvision.models.resnet18(weights=None)
    yield "mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(weights=None)
    yield "mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None)
    yield "convnext_tiny", lambda: torchvision.models.convnext_tiny(weights=None)
    try:
        import timm
        yield "efficientnet_b0", lambda: timm.create_model("efficientnet_b0", pretrained=False)
    except ImportError:
        print("efficientnet_b0: timm is not installed: torchvision's")
        yield "efficientnet_b0", lambda: torchvision.models.efficientnet_b0(weights=None)
    yield "densenet121", lambda: torchvision.models.densenet121(weights=None)
    yield "lraspp", lraspp
    yield "swin_t", lambda: torchvision.models.swin_t(weights=None)
    yield "blocks", blocks
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from peer_yolo import YOLOv8n
    yield "yolov8n", YOLOv8n
    yield "vit", vit


def vit():
    """torchvision's VisionTransformer, small (2 layers of 4 heads, width 64) at the input's size:
    the class token joined to the patches, attention as exported (products of computed tensors),
    the class token gathered for the head. Its zero-initialised parameters (the class token, the
    head) drawn at random, so that they count."""
    import torchvision
    model = torchvision.models.VisionTransformer(image_size=size, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                                 mlp_dim=128, num_classes=10)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def blocks():
    """Layers of generators and segmentation decoders as torch.nn writes them: GroupNorm (exported
    as InstanceNormalization of the groups, then the affine), bilinear upsampling with aligned
    corners, ReflectionPad2d, InstanceNorm2d with affine, LeakyReLU(0.2), ZeroPad2d wider on one
    side, a max pool, global average pooling and a linear classifier."""
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                          nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), nn.ReflectionPad2d(1),
                          nn.Conv2d(16, 8, 3, stride=2), nn.InstanceNorm2d(8, affine=True), nn.LeakyReLU(0.2),
                          nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)  # the norms' affine away from 1 and 0
    return model


def lraspp():
    """torchvision's LR-ASPP segmentation network (MobileNetV3-Large), its per-pixel class scores
    (the "out" of its dictionary) resized bilinearly to the input's size."""
    import torchvision

    class Scores(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)

        def forward(self, x):
            return self.net(x)["out"]
    return Scores()


def export(model, x, path):
    if os.environ.get("PEER_EXPORTER") == "dynamo":  # torch.export's exporter (the default from PyTorch 2.9)
        torch.onnx.export(model, (x,), path, dynamo=True, input_names=["x"], output_names=["logits"], opset_version=18,
                          external_data=False)
        return
    kwargs = dict(input_names=["x"], output_names=["logits"], opset_version=17, do_constant_folding=True)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:  # a torch without the dynamo switch exports through TorchScript anyway
        torch.onnx.export(model, (x,), path, **kwargs)


def lively(model):
    """BatchNorm statistics and affine drawn at random (a fresh network's are 0, 1, 1, 0, which
    fold away and leave logits near 0 in the deeper networks)."""
    g = torch.Generator().manual_seed(2)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=g) + 0.5
            m.bias.data = torch.rand(c, generator=g) * 0.4 - 0.2
            m.running_mean = torch.randn(c, generator=g) * 0.1
            m.running_var = torch.rand(c, generator=g) + 0.5
    return model


for name, make in networks():
    torch.manual_seed(0)
    model = lively(make()).eval()
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))
    export(model, x, f"{out}/{name}.onnx")
    with torch.no_grad():
        y = model.to(dev)(x.to(dev)).double().cpu().numpy()
    np.save(f"{out}/{name}_in.npy", x.numpy().astype(np.float32))
    np.save(f"{out}/{name}_out.npy", y)
    print(f"{name}: exported, logits {tuple(y.shape)}, largest |logit| {np.abs(y).max():.4g}")
