"""PyTorch's nearest upsample on the cases of bench/upsample.lua, timed the same way.

    python3 bench/upsample_torch.py DIR

Reads DIR/cases.csv, writes DIR/torch.csv with the columns of DIR/tocha.csv: forward is
F.interpolate(mode="nearest"), backward aten.upsample_nearest2d_backward, on NCHW tensors or,
for the NHWC cases, on tensors in torch.channels_last (PyTorch's NHWC); each the median of
device-event times over 50 launches after a warm-up, two input/output sets in turn. Also
writes DIR/torch_host.csv: PyTorch's version, its copy bandwidth, its launch floor (one
torch.cuda._sleep(0), an empty kernel, between events, timed as the cases are), and the host
costs bench/upsample.lua measures for tocha (host_costs).
"""
import csv
import sys
import time

import torch
import torch.nn.functional as F

from torch_timing import copy_bandwidth, time_launches

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}
LAUNCHES = 50


def make(shape, dtype, seed, layout):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == torch.uint8:
        t = torch.randint(0, 256, shape, dtype=dtype, device="cuda", generator=g)
    else:
        t = torch.rand(shape, dtype=dtype, device="cuda", generator=g) * 16 - 8
    return t.contiguous(memory_format=torch.channels_last) if layout == "nhwc" else t


def main(out):
    copy = copy_bandwidth()
    print(f"torch {torch.__version__}: device-to-device copy {copy:.1f} GB/s")
    rows = []
    with open(f"{out}/cases.csv") as f:
        for c in csv.DictReader(f):
            b, ch, h, w = (int(c[k]) for k in ("B", "C", "H", "W"))
            sh, sw = int(c["scale_h"]), int(c["scale_w"])
            dtype = DTYPES[c["dtype"]]
            layout = c["layout"]
            oh, ow = h * sh, w * sw
            if c["op"] == "forward":
                sets = [make((b, ch, h, w), dtype, s, layout) for s in (1, 2)]
                outs = [None, None]

                def fn(k):
                    outs[k % 2] = F.interpolate(sets[k % 2], scale_factor=(sh, sw), mode="nearest")
            else:
                sets = [make((b, ch, oh, ow), dtype, s, layout) for s in (1, 2)]

                def fn(k):
                    torch.ops.aten.upsample_nearest2d_backward(
                        sets[k % 2], [oh, ow], [b, ch, h, w], float(sh), float(sw))
            ms = time_launches(fn, LAUNCHES)
            gbps = int(c["bytes"]) / (ms * 1e6)
            rows.append(["torch", c["suite"], c["name"], c["op"], c["dtype"], layout, b, ch, h, w, sh, sw,
                         0, c["bytes"], f"{ms:.6g}", f"{gbps:.6g}", f"{100 * gbps / copy:.6g}",
                         f"{copy:.6g}"])
            print(f"{c['suite']} {c['op']} {c['dtype']} {layout} {c['name']:24} {ms:9.4f} ms "
                  f"{gbps:7.1f} GB/s {100 * gbps / copy:5.1f}% of copy")
            del sets
            torch.cuda.empty_cache()
    with open(f"{out}/torch.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["impl", "suite", "name", "op", "dtype", "layout", "B", "C", "H", "W",
                         "scale_h", "scale_w", "block", "bytes", "median_ms", "gbps", "pct_copy",
                         "copy_gbps"])
        writer.writerows(rows)
    with open(f"{out}/torch_host.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["measure", "value"])
        writer.writerow(["torch_version", torch.__version__])
        writer.writerow(["copy_gbps", f"{copy:.6g}"])
        writer.writerow(["launch_floor_us", f"{1e3 * time_launches(lambda k: torch.cuda._sleep(0), 200):.6g}"])
        for name, value in host_costs().items():
            writer.writerow([name, f"{value:.6g}"])


def host_costs():
    """The host measures bench/upsample.lua takes, for PyTorch: a small forward (1x16x32x32,
    2x2) into a given output and with a new one each call, microseconds of host time per call
    in drained batches of 250; a chain of 100 such launches called one by one and replayed as a
    CUDA graph, wall time per launch over rounds of 100, each drained."""
    x = torch.rand((1, 16, 32, 32), device="cuda")
    y = torch.empty((1, 16, 64, 64), device="cuda")

    def into():
        torch.ops.aten.upsample_nearest2d.out(x, [64, 64], None, None, out=y)

    def alloc():
        F.interpolate(x, scale_factor=(2, 2), mode="nearest")

    def per_call(call, n=20000):
        spent = 0.0
        for _ in range(n // 250):
            t0 = time.perf_counter()
            for _ in range(250):
                call()
            spent += time.perf_counter() - t0
            torch.cuda.synchronize()
        return spent * 1e6 / n

    def per_launch(round_, chain=100, rounds=50):
        round_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(rounds):
            round_()
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6 / (rounds * chain)

    def chain():
        for _ in range(100):
            into()

    out = {"forward_call_host_us": per_call(into), "forward_alloc_call_host_us": per_call(alloc),
           "chain_direct_launch_us": per_launch(chain)}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture asks
        chain()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    out["chain_graph_launch_us"] = per_launch(graph.replay)
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/tmp")
