"""PyTorch's reductions and channel bias add on the cases of bench/reduction.lua, timed the same
way.

    python3 bench/reduction_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv and writes DIR/torch.csv (same columns) and DIR/report.md, the two side by
side. sum/mean over every element: torch.sum / torch.mean; over a dimension (1-based in the
CSV): x.sum(d - 1, keepdim=True) and likewise; max over every element torch.max(x), over a
dimension torch.amax(x, d - 1, keepdim=True). bias forward: x + b.view(1, C, 1, ...); backward:
torch.autograd.grad of that for a given dy, which gives dx as dy itself (no kernel) and sums db:
PyTorch moves fewer bytes there than tocha, which also writes dx (the % of copy counts tocha's
bytes for both).
"""
import sys

import torch

from torch_timing import time_cases, time_launches

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
LAUNCHES = 50


def reducer(op, dim):
    if dim == 0:
        return {"sum": torch.sum, "mean": torch.mean, "max": torch.max}[op]
    d = dim - 1
    if op == "max":
        return lambda x: torch.amax(x, d, keepdim=True)
    if op == "mean":
        return lambda x: x.mean(d, keepdim=True)
    return lambda x: x.sum(d, keepdim=True)


def case_ms(r):
    shape = [int(v) for v in r["shape"].split("x")]
    dt = DTYPES[r["dtype"]]
    sets = []
    for s in range(2):
        g = torch.Generator(device="cuda").manual_seed(s)
        x = torch.randn(shape, dtype=dt, device="cuda", generator=g)
        if r["op"] == "bias":
            b = torch.randn(shape[1], dtype=dt, device="cuda", generator=g)
            sets.append((x, b.view([1, shape[1]] + [1] * (len(shape) - 2))))
        else:
            sets.append((x, None))
    if r["op"] != "bias":
        fn = reducer(r["op"], int(r["dim"]))
        return time_launches(lambda k: fn(sets[k % 2][0]), LAUNCHES)
    if r["dir"] == "forward":
        return time_launches(lambda k: sets[k % 2][0] + sets[k % 2][1], LAUNCHES)
    graphs = []
    for x, b in sets:
        x.requires_grad_(True)
        b.requires_grad_(True)
        graphs.append((x, b, x + b, torch.randn_like(x)))

    def launch(k):
        x, b, y, dy = graphs[k % 2]
        return torch.autograd.grad(y, (x, b), dy, retain_graph=True)
    return time_launches(launch, LAUNCHES)


def main(out):
    ours, theirs, copy = time_cases(
        out, case_ms, lambda r: f"{r['op']:5} dim {r['dim']} {r['dir']:8} {r['dtype']:5} {r['shape']:16}")
    lines = [f"# Reductions and channel bias add on the device: tocha beside PyTorch {torch.__version__}", "",
             f"Copy bandwidth {copy:.0f} GB/s (PyTorch's measure). % of copy counts the bytes tocha's op "
             "reads and writes (dim 0: every element).", "",
             "| op | dim | dir | dtype | shape | MB | tocha us | % copy | torch us | torch % copy | x torch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r, t in zip(ours, theirs):
        ms, tms = float(r["ms"]), float(t["ms"])
        lines.append(f"| {r['op']} | {r['dim']} | {r['dir']} | {r['dtype']} | {r['shape']} | "
                     f"{int(r['bytes']) / 1e6:.1f} | {ms * 1e3:.1f} | {float(r['pct_copy']):.1f} | "
                     f"{tms * 1e3:.1f} | {t['pct_copy']:.1f} | {tms / ms:.2f} |")
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}/torch.csv and {out}/report.md")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        LAUNCHES = int(sys.argv[2])
    main(sys.argv[1] if len(sys.argv) > 1 else "results/tmp-reduction")
