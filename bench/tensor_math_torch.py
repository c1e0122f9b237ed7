"""PyTorch's tensor math on the cases of bench/tensor_math.lua, timed the same way.

    python3 bench/tensor_math_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv (each case's shapes and PyTorch expression over x and y), writes
DIR/torch.csv and DIR/report.md: time, GB/s and % of the copy bandwidth of both, side by side.
Like tocha's, each timed call allocates its result (from PyTorch's caching allocator)."""
import sys

import torch

from torch_timing import time_cases, time_launches

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def shape(text):
    return [int(v) for v in text.split("x")] if text else None


def case_ms(r, launches):
    dt = DTYPES[r["dtype"]]
    sets = []
    for s in range(2):
        g = torch.Generator(device="cuda").manual_seed(s)
        x = torch.randn(shape(r["x"]), generator=g, device="cuda").to(dt)
        y = torch.randn(shape(r["y"]), generator=g, device="cuda").to(dt) if r["y"] else None
        sets.append({"x": x, "y": y, "torch": torch})
    expr = compile(r["torch"], "<case>", "eval")
    return time_launches(lambda k: eval(expr, {}, sets[k % 2]), launches)


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    ours, theirs, copy = time_cases(out, lambda r: case_ms(r, launches), lambda r: f"{r['name']:18} {r['dtype']:5} {r['x']:16}")
    lines = [f"# Tensor math beside PyTorch {torch.__version__} ({torch.cuda.get_device_name()})", "",
             f"Device-to-device copy: {copy:.1f} GB/s. Median of {launches} launches; % of copy counts the bytes each case must move.", "",
             "| case | dtype | x | y | tocha ms | PyTorch ms | tocha % copy | PyTorch % copy | tocha / PyTorch time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        lines.append(f"| {a['name']} | {a['dtype']} | {a['x']} | {a['y']} | {float(a['ms']):.4f} | {b['ms']:.4f} | "
                     f"{float(a['pct_copy']):.1f}% | {b['pct_copy']:.1f}% | {float(a['ms']) / b['ms']:.2f} |")
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
