"""PyTorch's scaled dot-product attention on the cases of bench/attention.lua, timed the same way.

    python3 bench/attention_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv, writes DIR/torch.csv and DIR/report.md: time and TFLOP/s of both, side by
side. PyTorch runs F.scaled_dot_product_attention with its flash backend (the fastest it has
for these dtypes and head sizes on an H200); the backward is torch.autograd.grad of the output
with the same dy, which runs the flash backward (its forward's saved outputs kept, as
autograd keeps them: tocha's backward recomputes its forward instead, and its time includes
that). Each timed call allocates its results."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import time_flop_cases, time_launches, write_report

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def case_ms(r, launches):
    dt = DTYPES[r["dtype"]]
    b, h, l, d = (int(r[key]) for key in ("batch", "heads", "tokens", "head_size"))
    causal = r["causal"] == "1"
    sets = []
    for s in range(2):
        g = torch.Generator(device="cuda").manual_seed(s)
        sets.append([torch.randn(b, h, l, d, generator=g, device="cuda").to(dt).requires_grad_(True) for _ in range(3)])
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        if r["pass"] == "forward":
            with torch.no_grad():
                return time_launches(lambda k: F.scaled_dot_product_attention(*sets[k % 2], is_causal=causal), launches)
        outs = [F.scaled_dot_product_attention(*s, is_causal=causal) for s in sets]
        dy = torch.randn(b, h, l, d, device="cuda").to(dt)
        return time_launches(lambda k: torch.autograd.grad(outs[k % 2], sets[k % 2], dy, retain_graph=True), launches)


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ours, theirs = time_flop_cases(out, lambda r: case_ms(r, launches),
                                   lambda r: f"{r['name']:20} {r['pass']:8} {r['dtype']:5}")
    lines = [f"# Scaled dot-product attention beside PyTorch {torch.__version__} (flash backend, "
             f"{torch.cuda.get_device_name()})", "",
             f"Median of {launches} calls; TFLOP/s counts 4 B H L^2 D a forward (half that causal), 2.5 times that "
             "a backward (tocha's backward recomputes its forward inside; PyTorch's autograd keeps its forward's "
             "outputs).", "",
             "| case | pass | dtype | B x H x L x D | causal | tocha ms | PyTorch ms | tocha TFLOP/s | PyTorch TFLOP/s | "
             "tocha / PyTorch throughput |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        lines.append(f"| {a['name']} | {a['pass']} | {a['dtype']} | {a['batch']} x {a['heads']} x {a['tokens']} x "
                     f"{a['head_size']} | {'yes' if a['causal'] == '1' else 'no'} | {float(a['ms']):.4f} | "
                     f"{b['ms']:.4f} | {float(a['tflops']):.1f} | {b['tflops']:.1f} | "
                     f"{float(a['tflops']) / b['tflops']:.2f} |")
    write_report(out, lines)


if __name__ == "__main__":
    main()
