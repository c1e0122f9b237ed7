"""PyTorch's layers on the cases of bench/layers.lua, timed the same way.

    python3 bench/layers_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv (each case's name, pass, dtype and shapes), writes DIR/torch.csv (same
columns, PyTorch's times), DIR/report.md (time and % of the copy bandwidth of both, side by
side, and the bytes each case counts) and DIR/layers.png (bench/layers_plot.py: % of copy per
case, both). Forward: the torch.nn.functional call of the `torch` column. Backward:
torch.autograd.grad of that call's output for a given dy, with respect to the input and the
layer's weights, the kernels autograd runs (the residual add's gradient is dy itself: no
kernel, so that row is left out of the ratio). A loss: the loss and torch.autograd.grad of it
with respect to the input in one timed call, as tocha.loss gives both.
Outputs: torch.add and torch.mul write into preallocated outputs (out=), as tocha's calls do;
the F.* calls and autograd take none and allocate theirs from the caching allocator (host work
only: the device is held busy before each timed call, so the events time the device's work).
Each the median of device-event times over LAUNCHES (default 30) launches after a warm-up,
two input sets in turn. An unknown case or pass in tocha.csv stops the script before anything
is timed."""
import argparse
import csv
import os
import shutil

import torch
import torch.nn.functional as F

from layers_plot import NO_KERNEL, plot
from torch_timing import time_cases, time_launches

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def shape(text):
    return [int(v) for v in text.split("x")] if text else None


def randn(s, dt, g):
    return torch.randn(s, generator=g, device="cuda").to(dt)


def rand(s, dt, g):
    """Positive values near 1: weights and running variances."""
    return (torch.rand(s, generator=g, device="cuda") + 0.5).to(dt)


# Each case: its passes, inputs(x, y, dt, g) -> the forward's arguments (a list), forward(*args),
# the positions of the arguments the backward differentiates, and the bytes bench/layers.lua
# counts for it, for the report (n: x's elements, C: its channels, H: its last size, N: its rows
# or batch, nout: the pool's output elements).
class Case:
    def __init__(self, passes, inputs, forward, grad_of, bytes_rule):
        self.passes, self.inputs, self.forward = passes, inputs, forward
        self.grad_of, self.bytes_rule = grad_of, bytes_rule


def bn_inputs(x, _, dt, g):
    c = x[1]
    return [randn(x, dt, g), rand([c], dt, g), randn([c], dt, g), randn([c], dt, g), rand([c], dt, g)]


def bn_nhwc_inputs(x, _, dt, g):
    """bn_inputs for x given channels-last ([N, H, W, C]): an NCHW tensor of channels_last strides."""
    c = x[3]
    return [randn(x, dt, g).permute(0, 3, 1, 2), rand([c], dt, g), randn([c], dt, g), randn([c], dt, g),
            rand([c], dt, g)]


def affine_inputs(params):
    """x, then `params` parameters of x's channels (4-D) or last size (rows): weight, bias."""
    def inputs(x, _, dt, g):
        n = x[1] if len(x) == 4 else x[-1]
        return [randn(x, dt, g), rand([n], dt, g)] + ([randn([n], dt, g)] if params == 2 else [])
    return inputs


def x_only(x, _, dt, g):
    return [randn(x, dt, g)]


def pair_inputs(x, y, dt, g):
    return [randn(x, dt, g), randn(y, dt, g)]


def class_inputs(x, _, dt, g):
    return [randn(x, dt, g), torch.randint(0, x[1], (x[0],), generator=g, device="cuda")]


def ids_inputs(x, y, dt, g):
    """Token ids below the table's rows (x their shape), then the table (y: [V, D])."""
    return [torch.randint(0, y[0], x, generator=g, device="cuda"), randn(y, dt, g)]


FWD, BWD, BOTH = ("forward",), ("forward", "backward"), ("forward+backward",)
CASES = {
    "BatchNorm2d train": Case(BWD, bn_inputs, lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True),
                              (0, 1, 2), "forward 2n + 6C; backward 3n + 3C"),
    "BatchNorm2d eval": Case(FWD, bn_inputs, lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False),
                             (), "forward 2n + 4C"),
    "BatchNorm2d train nhwc": Case(BWD, bn_nhwc_inputs,
                                   lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True), (0, 1, 2),
                                   "forward 2n + 6C; backward 3n + 3C (C the last dimension)"),
    "BatchNorm2d eval nhwc": Case(FWD, bn_nhwc_inputs,
                                  lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False), (),
                                  "forward 2n + 4C (C the last dimension)"),
    "GroupNorm 32": Case(BWD, affine_inputs(2), lambda x, w, b: F.group_norm(x, 32, w, b), (0, 1, 2),
                         "forward 2n + 2C; backward 3n + 3C"),
    "LayerNorm": Case(BWD, affine_inputs(2), lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (0, 1, 2),
                      "forward 2n + 2H; backward 3n + 3H"),
    "RMSNorm": Case(BWD, affine_inputs(1), lambda x, w: F.rms_norm(x, (x.shape[-1],), w), (0, 1),
                    "forward 2n + H; backward 3n + 2H"),
    "MaxPool2d 3x3 s2 p1": Case(BWD, x_only, lambda x: F.max_pool2d(x, 3, 2, 1), (0,),
                                "forward n + nout; backward 2n + nout (x read to find each maximum)"),
    "MaxPool2d 2x2": Case(BWD, x_only, lambda x: F.max_pool2d(x, 2), (0,), "forward n + nout; backward 2n + nout"),
    "AvgPool2d 2x2": Case(BWD, x_only, lambda x: F.avg_pool2d(x, 2), (0,), "forward n + nout; backward n + nout"),
    "AdaptiveAvgPool2d 1x1": Case(BWD, x_only, lambda x: F.adaptive_avg_pool2d(x, 1), (0,),
                                  "forward n + nout; backward n + nout"),
    "UpsampleBilinear2d 2x": Case(BWD, x_only, lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), (0,),
                                  "forward n + nout; backward nout + n"),
    "UpsampleBilinear2d to 512": Case(BWD, x_only, lambda x: F.interpolate(x, size=(512, 512), mode="bilinear"), (0,),
                                      "forward n + nout; backward nout + n"),
    "Pad reflect 1": Case(BWD, x_only, lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), (0,),
                          "forward n + nout; backward nout + n"),
    "Pad zeros 1": Case(BWD, x_only, lambda x: F.pad(x, (1, 1, 1, 1)), (0,), "forward n + nout; backward nout + n"),
    "Softmax": Case(BWD, x_only, lambda x: torch.softmax(x, -1), (0,), "forward 2n; backward 3n (y, dy, dx)"),
    "LogSoftmax": Case(BWD, x_only, lambda x: torch.log_softmax(x, -1), (0,), "forward 2n; backward 3n (y, dy, dx)"),
    "Dropout 0.1": Case(BWD, x_only, lambda x: F.dropout(x, 0.1, training=True), (0,),
                        "forward 2n; backward 2n (no mask counted)"),
    "add residual": Case(BWD, pair_inputs, torch.add, (0, 1), "forward 3n; backward 3n (dy, da, db)"),
    "mul channel scale": Case(BWD, pair_inputs, torch.mul, (0, 1),
                              "forward 2n + NC; backward 3n + 2NC (x, s, dy read, dx, ds written)"),
    "Embedding": Case(BWD, ids_inputs, F.embedding, (1,), "forward 8N bytes + 2ND; backward 8N bytes + ND + VD"),
    "cross_entropy": Case(BOTH, class_inputs, F.cross_entropy, (0,),
                          "2n + 1 (logits, dlogits, loss) + 8N bytes of i64 targets"),
    "mse": Case(BOTH, pair_inputs, F.mse_loss, (0,), "3n + 1 (x, t, dx, loss)"),
}
# Forwards whose PyTorch call takes a preallocated output.
OUT_FORWARD = {"add residual": torch.add, "mul channel scale": torch.mul}


def check_rows(out):
    """tocha.csv's cases, each known with its pass and dtype; anything else stops the script."""
    with open(f"{out}/tocha.csv") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{out}/tocha.csv: no cases")
    for r in rows:
        case = CASES.get(r["name"])
        if case is None:
            raise SystemExit(f"{out}/tocha.csv: unknown case {r['name']!r}; "
                             f"layers_torch.py knows: {', '.join(CASES)}")
        if r["pass"] not in case.passes:
            raise SystemExit(f"{out}/tocha.csv: case {r['name']!r} has no pass {r['pass']!r} here "
                             f"(known: {', '.join(case.passes)})")
        if r["dtype"] not in DTYPES:
            raise SystemExit(f"{out}/tocha.csv: case {r['name']!r}: unknown dtype {r['dtype']!r}")


def launch_of(r, s):
    """The timed call of row r on input set s."""
    case, dt = CASES[r["name"]], DTYPES[r["dtype"]]
    g = torch.Generator(device="cuda").manual_seed(s)
    args = case.inputs(shape(r["x"]), shape(r["y"]), dt, g)
    if r["pass"] == "forward" and r["name"] in OUT_FORWARD:
        y = torch.empty(torch.broadcast_shapes(*(a.shape for a in args)), dtype=dt, device="cuda")
        return lambda: OUT_FORWARD[r["name"]](*args, out=y)
    if r["pass"] == "forward":
        return lambda: case.forward(*args)
    wrt = [args[i] for i in case.grad_of]
    for t in wrt:
        t.requires_grad_(True)
    if r["pass"] == "forward+backward":
        return lambda: torch.autograd.grad(case.forward(*args), wrt)
    y = case.forward(*args)
    dy = torch.randn(y.shape, generator=g, device="cuda").to(dt)
    if y.dim() == 4 and not y.is_contiguous() and y.is_contiguous(memory_format=torch.channels_last):
        dy = dy.contiguous(memory_format=torch.channels_last)  # dy laid out as y is, as tocha's case has it
    return lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True)


def case_ms(r, launches):
    sets = [launch_of(r, s) for s in range(2)]
    return time_launches(lambda k: sets[k % 2](), launches)


def report(out, ours, theirs, copy, launches, version, device):
    lines = [f"# Layers beside PyTorch {version} ({device})", "",
             f"Device-to-device copy: {copy:.1f} GB/s. Median of {launches} launches, two input sets in turn; "
             "% of copy counts the bytes each case must move (below). tocha's calls write into preallocated "
             "outputs (y, dx, da, db; the parameters' gradients, the losses and the ops' workspaces are "
             "allocated by the call); PyTorch's torch.add and torch.mul write into preallocated outputs (out=), "
             "its other calls allocate from its caching allocator. A backward is autograd's for a given dy "
             "(PyTorch's residual add runs no kernel there: no ratio).", "",
             "| case | pass | dtype | x | y | MB | tocha ms | PyTorch ms | tocha % copy | PyTorch % copy | "
             "tocha / PyTorch time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        no_kernel = (a["name"], a["pass"]) in NO_KERNEL
        ratio = "-" if no_kernel else f"{float(a['ms']) / float(b['ms']):.2f}"
        theirs_pct = "-" if no_kernel else f"{float(b['pct_copy']):.1f}%"
        lines.append(f"| {a['name']} | {a['pass']} | {a['dtype']} | {a['x']} | {a['y']} | {int(a['bytes']) / 1e6:.1f} | "
                     f"{float(a['ms']):.4f} | {float(b['ms']):.4f} | {float(a['pct_copy']):.1f}% | {theirs_pct} | {ratio} |")
    lines += ["", "Bytes each case counts, in elements of the dtype (n: x's elements, C: its channels, "
              "H: its last size, N: its rows or batch, nout: the pool's output elements):", ""]
    lines += [f"- {name}: {case.bytes_rule}" for name, case in CASES.items()]
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description="PyTorch's layers on the cases of bench/layers.lua, and the report.")
    parser.add_argument("dir", help="the folder of bench/layers.lua's tocha.csv")
    parser.add_argument("launches", nargs="?", type=int, default=30, help="timed launches a case (default 30)")
    opts = parser.parse_args()
    if opts.launches < 1:
        parser.error(f"LAUNCHES: expected a positive number, got {opts.launches}")
    if not os.path.isfile(f"{opts.dir}/tocha.csv"):
        parser.error(f"{opts.dir}/tocha.csv: no such file (run bench/layers.lua --out {opts.dir} first)")
    check_rows(opts.dir)
    ours, theirs, copy = time_cases(opts.dir, lambda r: case_ms(r, opts.launches),
                                    lambda r: f"{r['name']:22} {r['pass']:16} {r['dtype']:5} {r['x']:16}")
    report(opts.dir, ours, theirs, copy, opts.launches, torch.__version__, torch.cuda.get_device_name())
    if shutil.which("gnuplot"):
        plot(opts.dir, ours, theirs)
    else:
        print(f"gnuplot is not installed here: run python3 bench/layers_plot.py {opts.dir} where it is")


if __name__ == "__main__":
    main()
