"""The Python side of spec/peer_grads_spec.lua: PyTorch's autograd checks tocha's gradients.

    python3 peer_grads.py FILE

FILE (safetensors, written by tocha) holds, for each case, its inputs "<case>.in<i>", the
output gradient "<case>.dy" and tocha's gradients "<case>.grad<i>"; its metadata maps each
case to the op ("relu", "add", "upsample2x2", "cat", "chunk:<n>:<i>", "bias", "reduce:<mode>:<dim>").
Every case's gradients are recomputed with torch.autograd in f64 and compared; prints one line
per case and exits 1 when any differs by more than 1e-9 relative to its scale.
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from safetensors import safe_open

UNARY = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
         "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
         "gelu": lambda x: F.gelu(x, approximate="none")}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "max": torch.maximum, "min": torch.minimum}


def forward(op, inputs):
    if op in UNARY:
        return UNARY[op](inputs[0])
    if op in BINARY:
        return BINARY[op](inputs[0], inputs[1])
    if op == "upsample2x2":
        return F.interpolate(inputs[0], scale_factor=2, mode="nearest")
    if op == "cat":
        return torch.cat(inputs, dim=1)
    if op.startswith("chunk:"):
        _, n, i = op.split(":")
        return torch.chunk(inputs[0], int(n), dim=1)[int(i) - 1]
    if op == "bias":
        x, b = inputs
        return x + b.view([1, -1] + [1] * (x.dim() - 2))
    if op.startswith("reduce:"):
        _, mode, dim = op.split(":")
        x, d = inputs[0], int(dim)
        if d == 0:
            return {"sum": torch.sum, "mean": torch.mean, "max": torch.max}[mode](x).reshape(1)
        d = d - 1 if d > 0 else x.dim() + d
        if mode == "max":
            return torch.amax(x, d, keepdim=True)
        return x.sum(d, keepdim=True) if mode == "sum" else x.mean(d, keepdim=True)
    raise ValueError(op)


def main(path):
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        cases = f.metadata()
    worst, ok = 0.0, True
    for case, op in sorted(cases.items()):
        inputs = []
        while f"{case}.in{len(inputs) + 1}" in tensors:
            inputs.append(tensors[f"{case}.in{len(inputs) + 1}"].clone().requires_grad_(True))
        y = forward(op, inputs)
        grads = torch.autograd.grad(y, inputs, tensors[f"{case}.dy"])
        for i, g in enumerate(grads):
            ours = tensors[f"{case}.grad{i + 1}"]
            scale = g.abs().max().item() + 1e-30
            err = (ours - g).abs().max().item() / scale
            worst = max(worst, err)
            if ours.shape != g.shape or err > 1e-9:
                ok = False
                print(f"MISMATCH {case} ({op}) input {i + 1}: relative error {err:.3g}")
    print(f"PyTorch {torch.__version__} autograd: {len(cases)} cases, worst relative error {worst:.3g}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1]) else 1)
