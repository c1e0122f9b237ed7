"""PyTorch's nearest upsample on the cases of bench/upsample.lua, timed the same way.

    python3 bench/upsample_torch.py DIR

Reads DIR/cases.csv, writes DIR/torch.csv with the columns of DIR/tocha.csv: forward is
F.interpolate(mode="nearest"), backward aten.upsample_nearest2d_backward; each the median of
device-event times over 50 launches after a warm-up, two input/output sets in turn.
"""
import csv
import statistics
import sys

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}
LAUNCHES = 50


def time_launches(fn, n):
    for k in range(5):
        fn(k)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for k in range(n):
        starts[k].record()
        fn(k)
        stops[k].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, stops))


def copy_bandwidth():
    n = 256 * 2**20
    src = torch.ones(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = time_launches(lambda k: dst.copy_(src), 20)
    return 2 * n * 4 / (ms * 1e6)


def make(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, device="cuda", generator=g)
    return torch.rand(shape, dtype=dtype, device="cuda", generator=g) * 16 - 8


def main(out):
    copy = copy_bandwidth()
    print(f"torch {torch.__version__}: device-to-device copy {copy:.1f} GB/s")
    rows = []
    with open(f"{out}/cases.csv") as f:
        for c in csv.DictReader(f):
            b, ch, h, w = (int(c[k]) for k in ("B", "C", "H", "W"))
            sh, sw = int(c["scale_h"]), int(c["scale_w"])
            dtype = DTYPES[c["dtype"]]
            oh, ow = h * sh, w * sw
            if c["op"] == "forward":
                sets = [make((b, ch, h, w), dtype, s) for s in (1, 2)]
                outs = [None, None]

                def fn(k):
                    outs[k % 2] = F.interpolate(sets[k % 2], scale_factor=(sh, sw), mode="nearest")
            else:
                sets = [make((b, ch, oh, ow), dtype, s) for s in (1, 2)]

                def fn(k):
                    torch.ops.aten.upsample_nearest2d_backward(
                        sets[k % 2], [oh, ow], [b, ch, h, w], float(sh), float(sw))
            ms = time_launches(fn, LAUNCHES)
            gbps = int(c["bytes"]) / (ms * 1e6)
            rows.append(["torch", c["op"], c["dtype"], b, ch, h, w, sh, sw, 0, c["bytes"],
                         f"{ms:.6g}", f"{gbps:.6g}", f"{100 * gbps / copy:.6g}", f"{copy:.6g}"])
            print(f"{c['op']:8} {c['dtype']:4} {sh}x{sw} W={w:<4} {ms:8.3f} ms {gbps:7.1f} GB/s "
                  f"{100 * gbps / copy:5.1f}% of copy")
            del sets
            torch.cuda.empty_cache()
    with open(f"{out}/torch.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["impl", "op", "dtype", "B", "C", "H", "W", "scale_h", "scale_w", "block",
                         "bytes", "median_ms", "gbps", "pct_copy", "copy_gbps"])
        writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/tmp")
