"""PyTorch's matrix products (cuBLAS) on the cases of bench/matmul.lua, timed the same way.

    python3 bench/matmul_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv (each case's shapes and dtype; b stored as given and read transposed where
`transposed` is 1, as a Linear's weight), writes DIR/torch.csv and DIR/report.md: time and
TFLOP/s of both, side by side. TF32 stays off (torch.backends.cuda.matmul.allow_tf32 = False,
PyTorch's default) for the f32 rows, as tocha's f32 products use none; the tf32 rows (f32
tensors, tocha's tf32 = true) turn it on for that call alone. Each timed call allocates its result."""
import sys

import torch

from torch_timing import time_flop_cases, time_launches, write_report

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def shape(text):
    return [int(v) for v in text.split("x")]


def case_ms(r, launches):
    dt = DTYPES[r["dtype"]]
    sets = []
    for s in range(2):
        g = torch.Generator(device="cuda").manual_seed(s)
        a = torch.randn(shape(r["a"]), generator=g, device="cuda").to(dt)
        b = torch.randn(shape(r["b"]), generator=g, device="cuda").to(dt)
        sets.append((a, b.transpose(-2, -1) if r["transposed"] == "1" else b))
    torch.backends.cuda.matmul.allow_tf32 = r["dtype"] == "tf32"
    try:
        return time_launches(lambda k: torch.matmul(*sets[k % 2]), launches)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    torch.backends.cuda.matmul.allow_tf32 = False
    ours, theirs = time_flop_cases(out, lambda r: case_ms(r, launches), lambda r: f"{r['name']:22} {r['dtype']:5}")
    lines = [f"# Matrix products beside PyTorch {torch.__version__} (cuBLAS, {torch.cuda.get_device_name()})", "",
             f"Median of {launches} launches; TFLOP/s counts 2 m n k a product.", "",
             "| case | dtype | a | b | tocha ms | PyTorch ms | tocha TFLOP/s | PyTorch TFLOP/s | tocha / PyTorch throughput |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        bt = a["b"] + (" (read transposed)" if a["transposed"] == "1" else "")
        lines.append(f"| {a['name']} | {a['dtype']} | {a['a']} | {bt} | {float(a['ms']):.4f} | {b['ms']:.4f} | "
                     f"{float(a['tflops']):.1f} | {b['tflops']:.1f} | {float(a['tflops']) / b['tflops']:.2f} |")
    write_report(out, lines)


if __name__ == "__main__":
    main()
