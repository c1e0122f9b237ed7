"""The Python side of spec/peer_onnx_spec.lua: networks no one here wrote, exported to ONNX by
PyTorch itself, with PyTorch's outputs on the same random input.

    python3 peer_onnx.py DIR

For torchvision's ResNet-18 and MobileNetV3-Small and timm's EfficientNet-B0 (each randomly
initialised from seed 0, eval mode), writes DIR/<name>.onnx (torch.onnx.export, opset 17, the
TorchScript exporter), DIR/<name>_in.npy (a [2, 3, 224, 224] f32 input from seed 1) and
DIR/<name>_out.npy (PyTorch's logits on cuda in f32, TF32 off, as float64). Prints a line a
network; a network whose package is missing is left out, saying so.
"""
import sys

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
out = sys.argv[1]
dev = torch.device("cuda")


def networks():
    import torchvision
    yield "resnet18", lambda: torchvision.models.resnet18(weights=None)
    yield "mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(weights=None)
    try:
        import timm
        yield "efficientnet_b0", lambda: timm.create_model("efficientnet_b0", pretrained=False)
    except ImportError:
        print("efficientnet_b0: timm is not installed, left out")


def export(model, x, path):
    kwargs = dict(input_names=["x"], output_names=["logits"], opset_version=17, do_constant_folding=True)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:  # a torch without the dynamo switch exports through TorchScript anyway
        torch.onnx.export(model, (x,), path, **kwargs)


for name, make in networks():
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    export(model, x, f"{out}/{name}.onnx")
    with torch.no_grad():
        y = model.to(dev)(x.to(dev)).double().cpu().numpy()
    np.save(f"{out}/{name}_in.npy", x.numpy().astype(np.float32))
    np.save(f"{out}/{name}_out.npy", y)
    print(f"{name}: exported, logits {tuple(y.shape)}, largest |logit| {np.abs(y).max():.4g}")
