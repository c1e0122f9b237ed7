"""PyTorch's peers of the rows of bench/conv.lua, timed the same way.

    python3 bench/conv_torch.py DIR [LAUNCHES]

Reads DIR/tocha.csv, writes DIR/torch.csv and DIR/report.md. PyTorch runs each case with
cudnn.benchmark on (its fastest algorithm for the shape) in both layouts, channels_last and
NCHW, and the faster counts: the target is a share of cuDNN in its best layout. Each timed call
allocates its result, as tocha's does. The peers by op: conv, F.conv2d and its backward
(aten.convolution_backward); conv+silu, F.silu(F.conv2d(...)) (PyTorch eager does not fuse
them); deconv, F.conv_transpose2d and its backward; depthwise, F.conv2d with groups = channels.
The report adds GB/s and % of the copy bandwidth for the memory-bound depthwise rows. Rows of
dtype tf32 (f32 tensors, tocha's tf32 = true) run with cudnn.allow_tf32 on, the others with it
off."""
import sys

import torch
import torch.nn.functional as F

from torch_timing import copy_bandwidth, time_flop_cases, time_launches, write_report

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def case_ms(r, launches):
    dt = DTYPES[r["dtype"]]
    torch.backends.cudnn.allow_tf32 = r["dtype"] == "tf32"  # f32 rows as tocha's f32: no TF32
    op = r.get("op", "conv")
    n, cin, cout, k, size = (int(r[key]) for key in ("n", "cin", "cout", "k", "size"))
    stride, padding = int(r["stride"]), int(r["padding"])
    output_padding = int(r.get("output_padding", 0) or 0)
    groups = cin if op == "depthwise" else 1
    transposed = op == "deconv"
    best = None
    for layout in (torch.channels_last, torch.contiguous_format):
        g = torch.Generator(device="cuda").manual_seed(1)
        wshape = (cin, cout, k, k) if transposed else (cout, cin // groups, k, k)
        w = torch.randn(*wshape, generator=g, device="cuda").to(dt).contiguous(memory_format=layout)
        b = torch.randn(cout, generator=g, device="cuda").to(dt)
        xs = [torch.randn(n, cin, size, size, generator=g, device="cuda").to(dt).contiguous(memory_format=layout)
              for _ in range(2)]

        def forward(x):
            if transposed:
                return F.conv_transpose2d(x, w, b, stride=stride, padding=padding, output_padding=output_padding)
            y = F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups)
            return F.silu(y) if op == "conv+silu" else y

        if r["pass"] == "forward":
            ms = time_launches(lambda i: forward(xs[i % 2]), launches)
        else:
            y = forward(xs[0])
            dy = torch.randn(*y.shape, generator=g, device="cuda").to(dt).contiguous(memory_format=layout)
            ms = time_launches(lambda i: torch.ops.aten.convolution_backward(
                dy, xs[i % 2], w, [cout], [stride] * 2, [padding] * 2, [1, 1], transposed,
                [output_padding] * 2 if transposed else [0, 0], groups, [True, True, True]), launches)
        name = "channels_last" if layout == torch.channels_last else "NCHW"
        if best is None or ms < best[0]:
            best = (ms, name)
    return best[0], {"torch_layout": best[1], "gbps": float(r["bytes"]) / (best[0] * 1e6)}


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.backends.cudnn.benchmark = True
    ours, theirs = time_flop_cases(out, lambda r: case_ms(r, launches),
                                   lambda r: f"{r['name']:32} {r['pass']:8} {r['dtype']:5} n {r['n']:3}")
    copy = copy_bandwidth()
    lines = [f"# Convolutions beside PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}, "
             f"{torch.cuda.get_device_name()}; copy bandwidth {copy:.0f} GB/s)", "",
             f"Median of {launches} calls; TFLOP/s counts 2 n oh ow out in kh kw / groups a forward (a transposed "
             "convolution's: its input pixels by the whole weight), twice that a backward (dx and dweight; dbias too); "
             "GB/s counts x, y and the weight once (the backward: x, dy, dx and the weight's two). tocha in each layout "
             "(the forward's k split where shown; the tensor cores column: which of the pass runs on them); PyTorch in "
             "its faster layout (cudnn.benchmark on).", "",
             "| op | case | pass | dtype | batch | tocha layout | k splits | tensor cores | tocha ms | PyTorch ms | "
             "tocha TFLOP/s | PyTorch TFLOP/s | tocha GB/s (% of copy) | PyTorch layout | tocha / PyTorch throughput |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for a, b in zip(ours, theirs):
        gbps = float(a["gbps"])
        lines.append(f"| {a['op']} | {a['name']} | {a['pass']} | {a['dtype']} | {a['n']} | {a['layout'].upper()} | "
                     f"{a['splits']} | {a['tensor_cores']} | "
                     f"{float(a['ms']):.4f} | {b['ms']:.4f} | "
                     f"{float(a['tflops']):.1f} | {b['tflops']:.1f} | {gbps:.0f} ({100 * gbps / copy:.0f}%) | "
                     f"{b['torch_layout']} | {float(a['tflops']) / b['tflops']:.2f} |")
    write_report(out, lines)


if __name__ == "__main__":
    main()
