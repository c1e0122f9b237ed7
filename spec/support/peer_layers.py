"""The Python side of spec/peer_layers_spec.lua: PyTorch recomputes tocha's tensor math, layers,
losses and optimizer steps.

    python3 peer_layers.py FILE

FILE (safetensors, written by tocha, f64 on cuda) holds for each case "<case>.in_<i>" (inputs),
"<case>.p<i>" (parameters, after the forward for a batch norm's running statistics), "<case>.dy1",
"<case>.out<i>" (tocha's outputs) and "<case>.grad<i>" (tocha's gradients: of the inputs, then
of the parameters; of the input for a loss; the step gradients for an optimizer); its metadata
maps each case to its op. Prints a line per mismatch and the worst relative error; exits 1 when
any result differs by more than 1e-12 of its largest magnitude.
"""
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file

TOL = 1e-12


def listed(tensors, case, kind):
    out = []
    while f"{case}.{kind}{len(out) + 1}" in tensors:
        out.append(tensors[f"{case}.{kind}{len(out) + 1}"])
    return out


def math_case(op, ins):
    kind, rest = op.split(":", 1)
    if kind == "unary":
        x = ins[0]
        return {"exp": torch.exp, "log1p": torch.log1p, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
                "gelu": lambda v: F.gelu(v, approximate="none"), "erf": torch.erf, "sin": torch.sin,
                "rsqrt": torch.rsqrt}[rest](x)
    if kind == "math":
        a = ins[0]
        if rest == "where":
            return torch.where(ins[0] > 0, ins[1], ins[2])
        if rest == "clamp":
            return a.clamp(-0.5, 0.7)
        b = ins[1]
        return {"add": torch.add, "div": torch.div, "pow": torch.pow, "maximum": torch.maximum,
                "remainder": torch.remainder}[rest](a, b)
    mode, dims = rest.split(":")
    x = ins[0]
    dims = tuple(int(d) - 1 if int(d) > 0 else x.dim() + int(d) for d in dims.split(","))
    if mode == "sum":
        return x.sum(dims)
    if mode == "mean":
        return x.mean(dims)
    if mode == "amax":
        return x.amax(dims)
    if mode == "prod":
        return x.prod(dims[0])
    if mode == "var":
        return x.var(dims)
    if mode == "std":
        return x.std(dims, correction=0)
    if mode == "argmax":
        return (x.argmax(dims[0]) + 1).double()
    if mode == "softmax":
        return x.softmax(dims[0])
    return x.log_softmax(dims[0])


ACTIVATIONS = {"identity": lambda v: v, "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
               "gelu": lambda v: F.gelu(v, approximate="none"), "mish": F.mish, "softplus": F.softplus, "selu": F.selu,
               "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}


def layer_forward(op, ins, params, start):
    name, *args = op.split(":")
    x = ins[0]
    if name == "conv":  # stride:padding:dilation:groups:activation:layout, an optional residual input
        s, p, d, g = (int(v) for v in args[:4])
        nhwc = args[5] == "nhwc"

        def nchw(t):
            return t.permute(0, 3, 1, 2) if nhwc else t
        y = F.conv2d(nchw(x), params[0], params[1], stride=s, padding=p, dilation=d, groups=g)
        if len(ins) > 1:
            y = y + nchw(ins[1])
        y = ACTIVATIONS[args[4]](y)
        return y.permute(0, 2, 3, 1) if nhwc else y
    if name == "deconv":  # stride:padding:output_padding:dilation:groups
        s, p, op_, d, g = (int(v) for v in args)
        return F.conv_transpose2d(x, params[0], params[1], stride=s, padding=p, output_padding=op_, groups=g, dilation=d)
    if name == "linear":
        return ACTIVATIONS[args[0]](F.linear(x, params[0], params[1]))
    if name in ("maxpool", "avgpool"):  # kernel:stride:padding:dilation:ceil[:nhwc]
        k, s, p, d, ceil = (int(v) for v in args[:5])
        nhwc = args[5:] == ["nhwc"]
        x = x.permute(0, 3, 1, 2) if nhwc else x
        if name == "maxpool":
            y = F.max_pool2d(x, k, s, p, d, ceil_mode=bool(ceil))
        else:
            y = F.avg_pool2d(x, k, s, p, ceil_mode=True, count_include_pad=False)
        return y.permute(0, 2, 3, 1) if nhwc else y
    if name == "broadcast":
        return {"mul": torch.mul, "div": torch.div, "max": torch.maximum}[args[0]](x, ins[1])
    if name == "adaptive":
        return F.adaptive_avg_pool2d(x, (int(args[0]), int(args[1])))
    if name == "softmax":
        return x.softmax(int(args[0]) - 1)
    if name == "log_softmax":
        return x.log_softmax(-1)
    if name == "layer_norm":
        shape = [int(v) for v in args[0].split(",")]
        return F.layer_norm(x, shape, params[0], params[1], float(args[1]))
    if name == "rms_norm":
        return F.rms_norm(x, [int(args[0])], params[0], float(args[1]))
    if name == "group_norm":
        return F.group_norm(x, int(args[0]), params[0], params[1], float(args[2]))
    if name == "batch_norm":  # momentum:eps[:nhwc]
        rm, rv = start[0].clone(), start[1].clone()
        nhwc = args[2:] == ["nhwc"]
        x = x.permute(0, 3, 1, 2) if nhwc else x
        y = F.batch_norm(x, rm, rv, params[0], params[1], training=True, momentum=float(args[0]), eps=float(args[1]))
        return (y.permute(0, 2, 3, 1) if nhwc else y), (rm, rv)
    raise ValueError(op)


def loss_value(op, ins):
    name, reduction, *rest = op.split(":")
    x, t = ins
    if name == "cross_entropy":
        # tocha's targets are 1-based, its ignored -100 becomes -101 here
        return F.cross_entropy(x, t.long() - 1, reduction=reduction, label_smoothing=float(rest[0]), ignore_index=-101)
    if name == "nll":
        return F.nll_loss(x, t.long() - 1, reduction=reduction, ignore_index=-101)
    if name == "mse":
        return F.mse_loss(x, t, reduction=reduction)
    if name == "l1":
        return F.l1_loss(x, t, reduction=reduction)
    return F.binary_cross_entropy_with_logits(x, t, reduction=reduction)


def rel(ours, theirs):
    scale = theirs.abs().max().item() + 1e-300
    if ours.shape != theirs.shape:
        return float("inf")
    return (ours - theirs).abs().max().item() / scale


def main(path):
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        cases = f.metadata()
    worst, failures = 0.0, []

    def compare(case, what, ours, theirs):
        nonlocal worst
        err = rel(ours.reshape(theirs.shape) if ours.numel() == theirs.numel() else ours, theirs)
        worst = max(worst, err)
        if not err <= TOL:
            failures.append(f"MISMATCH {case} ({cases[case]}) {what}: relative error {err:.3g}")

    for case, op in sorted(cases.items()):
        if op == "none":
            continue
        ins = listed(tensors, case, "in_")
        outs, grads = listed(tensors, case, "out"), listed(tensors, case, "grad")
        params = listed(tensors, case, "p")
        kind = op.split(":")[0]
        if kind in ("math", "unary", "reduce"):
            compare(case, "output", outs[0], math_case(op, ins))
        elif kind == "optim":
            w = ins[0].clone().requires_grad_(True)
            if op == "optim:adamw":
                opt = torch.optim.AdamW([w], lr=0.01, weight_decay=0.05, betas=(0.8, 0.95), eps=1e-7)
            else:
                opt = torch.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
            for g in grads:
                w.grad = g.clone()
                opt.step()
            compare(case, "parameters after the steps", outs[0], w.detach())
        elif kind in ("cross_entropy", "nll", "mse", "l1", "bce_with_logits"):
            x = ins[0].clone().requires_grad_(True)
            loss = loss_value(op, [x, ins[1]])
            (g,) = torch.autograd.grad(loss, [x])
            compare(case, "loss", outs[0], loss.detach().reshape(outs[0].shape))
            compare(case, "gradient", grads[0], g)
        else:
            xs = [t.clone().requires_grad_(True) for t in ins]
            trainable = params[:2] if kind == "batch_norm" else params
            ps = [t.clone().requires_grad_(True) for t in trainable]
            start = listed(tensors, "bn_start", "p")
            r = layer_forward(op, xs, ps, start)
            running = None
            if isinstance(r, tuple):
                r, running = r
            compare(case, "output", outs[0], r.detach())
            got = torch.autograd.grad(r, xs + ps, tensors[f"{case}.dy1"])
            for i, g in enumerate(got):
                compare(case, f"gradient {i + 1}", grads[i], g)
            if running is not None:
                compare(case, "running mean", params[2], running[0])
                compare(case, "running var", params[3], running[1])
    for line in failures:
        print(line)
    print(f"PyTorch {torch.__version__}: {len(cases)} cases, worst relative error {worst:.3g}")
    return not failures


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1]) else 1)
