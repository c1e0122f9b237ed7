"""PyTorch's recurrent layers on the cases of bench/recurrent.lua, timed the same way.

    python3 bench/recurrent_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv, writes DIR/torch.csv and DIR/report.md: time and TFLOP/s of both, side by
side. Each case is torch.nn.LSTM, GRU or RNN (one layer, one direction, time first) in the
case's dtype, run by cuDNN as PyTorch calls it. Forward: the module on x under no_grad.
Backward: torch.autograd.grad of the output for a given dy with respect to x and the four
parameters (cuDNN's backward data and weights; autograd keeps the forward's reserve, where
tocha's backward recomputes its forward and includes it in its time). Each call allocates its
results. An unknown mode in tocha.csv stops the script before anything is timed."""
import csv
import sys

import torch

from torch_timing import time_flop_cases, time_launches, write_report

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
MODULES = {"lstm": lambda i, h: torch.nn.LSTM(i, h), "gru": lambda i, h: torch.nn.GRU(i, h),
           "rnn_tanh": lambda i, h: torch.nn.RNN(i, h, nonlinearity="tanh"),
           "rnn_relu": lambda i, h: torch.nn.RNN(i, h, nonlinearity="relu")}


def case_ms(r, launches):
    dt = DTYPES[r["dtype"]]
    t, b, i, h = (int(r[key]) for key in ("steps", "batch", "input", "hidden"))
    torch.manual_seed(0)
    layer = MODULES[r["mode"]](i, h).to(device="cuda", dtype=dt)
    xs = [torch.randn(t, b, i, device="cuda").to(dt).requires_grad_(True) for _ in range(2)]
    if r["pass"] == "forward":
        with torch.no_grad():
            return time_launches(lambda k: layer(xs[k % 2]), launches)
    outs = [layer(x)[0] for x in xs]
    dy = torch.randn(t, b, h, device="cuda").to(dt)
    wrt = [list(layer.parameters()) + [x] for x in xs]
    return time_launches(lambda k: torch.autograd.grad(outs[k % 2], wrt[k % 2], dy, retain_graph=True), launches)


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # f32 as f32, as tocha's f32 product
    with open(f"{out}/tocha.csv") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["mode"] not in MODULES or r["dtype"] not in DTYPES:
            raise SystemExit(f"unknown case in tocha.csv: {r['name']} {r['mode']} {r['dtype']}")
    ours, theirs = time_flop_cases(out, lambda r: case_ms(r, launches),
                                   lambda r: f"{r['name']:22} {r['pass']:8} {r['dtype']:5}")
    lines = [f"# Recurrent layers beside PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}, "
             f"{torch.cuda.get_device_name()})", "",
             f"Median of {launches} calls; a layer is the input's projection and the recurrence; TFLOP/s counts "
             "the products, 2 T B G H (I + H) a forward (G: 4 gates LSTM, 3 GRU, 1 RNN), twice that a backward "
             "(tocha's backward recomputes its forward inside; PyTorch's autograd keeps cuDNN's reserve). TF32 off.",
             "",
             "| case | pass | dtype | T x B x I -> H | tocha ms | PyTorch ms | tocha TFLOP/s | PyTorch TFLOP/s | "
             "tocha / PyTorch time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        lines.append(f"| {a['name']} | {a['pass']} | {a['dtype']} | {a['steps']} x {a['batch']} x {a['input']} -> "
                     f"{a['hidden']} | {float(a['ms']):.4f} | {b['ms']:.4f} | {float(a['tflops']):.2f} | "
                     f"{b['tflops']:.2f} | {float(a['ms']) / b['ms']:.2f} |")
    write_report(out, lines)


if __name__ == "__main__":
    main()
