"""PyTorch's elementwise ops on the cases of bench/elementwise.lua, timed the same way.

    python3 bench/elementwise_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv and writes DIR/torch.csv (same columns) and DIR/report.md, the two side by
side. Forward: torch.relu, F.gelu (exact), torch.sigmoid, torch.exp, torch.add, torch.mul,
torch.maximum, torch.cat along dimension 1. Backward: torch.autograd.grad of the same op for a
given dy, the kernels autograd runs (add's gradient is dy itself and cat's views of it: no
kernel, so their rows are left out of the ratio).
Each the median of device-event times over LAUNCHES (default 50) launches after a warm-up, two
tensor sets in turn.
"""
import sys

import torch
import torch.nn.functional as F

from torch_timing import time_cases, time_launches

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
SIZES = {"f32": 4, "f16": 2, "bf16": 2}
FNS = {"relu": torch.relu, "gelu": F.gelu, "sigmoid": torch.sigmoid, "exp": torch.exp,
       "add": torch.add, "mul": torch.mul, "max": torch.maximum,
       "cat": lambda a, b: torch.cat((a, b), dim=1)}
LAUNCHES = 50


def case_ms(fn_name, direction, dtype, shape):
    fn = FNS[fn_name]
    binary = fn_name in ("add", "mul", "max", "cat")
    sets = []
    for s in range(2):
        g = torch.Generator(device="cuda").manual_seed(s)
        a = torch.randn(shape, dtype=DTYPES[dtype], device="cuda", generator=g)
        b = torch.randn(shape, dtype=DTYPES[dtype], device="cuda", generator=g) if binary else None
        dy_shape = [shape[0], 2 * shape[1]] + shape[2:] if fn_name == "cat" else shape
        dy = torch.randn(dy_shape, dtype=DTYPES[dtype], device="cuda", generator=g)
        if direction == "backward":
            a.requires_grad_(True)
            if binary:
                b.requires_grad_(True)
            y = fn(a, b) if binary else fn(a)
            sets.append((a, b, dy, y))
        else:
            sets.append((a, b, dy, None))
    if direction == "forward":
        def launch(k):
            a, b, _, _ = sets[k % 2]
            return fn(a, b) if binary else fn(a)
    else:
        def launch(k):
            a, b, dy, y = sets[k % 2]
            return torch.autograd.grad(y, (a, b) if binary else (a,), dy, retain_graph=True)
    return time_launches(launch, LAUNCHES)


def row_ms(r):
    shape = [int(v) for v in r["shape"].split("x")]
    if r["fn"] == "cat" and len(shape) < 2:
        shape = [2, shape[0] // 2]
    return case_ms(r["fn"], r["dir"], r["dtype"], shape)


def main(out):
    ours, theirs, copy = time_cases(out, row_ms, lambda r: f"{r['fn']:8} {r['dir']:8} {r['dtype']:5} {r['shape']:16}")
    lines = [f"# Elementwise ops on the device: tocha beside PyTorch {torch.__version__}", "",
             f"Copy bandwidth {copy:.0f} GB/s (PyTorch's measure). % of copy counts the bytes the op "
             "must read and write; the same-bytes copy is a device copy of that many bytes, timed alike.", "",
             "| op | dir | dtype | shape | MB | tocha us | % copy | same-bytes copy % | torch us | torch % copy | x torch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r, t in zip(ours, theirs):
        ms, tms = float(r["ms"]), float(t["ms"])
        same = 100 * int(r["bytes"]) / (float(r["same_copy_ms"]) * 1e6) / copy
        no_kernel = r["dir"] == "backward" and r["fn"] in ("add", "cat")
        ratio = "-" if no_kernel else f"{tms / ms:.2f}"
        lines.append(f"| {r['fn']} | {r['dir']} | {r['dtype']} | {r['shape']} | {int(r['bytes']) / 1e6:.1f} | "
                     f"{ms * 1e3:.1f} | {float(r['pct_copy']):.1f} | {same:.1f} | {tms * 1e3:.1f} | "
                     f"{t['pct_copy']:.1f} | {ratio} |")
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}/torch.csv and {out}/report.md")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        LAUNCHES = int(sys.argv[2])
    main(sys.argv[1] if len(sys.argv) > 1 else "results/tmp-elementwise")
