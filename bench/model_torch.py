"""PyTorch on the DAG of bench/model.lua (examples/neck_model.lua), timed the same way.

    python3 bench/model_torch.py DIR [REPS]

Reads DIR/tocha.csv (its batches) and writes DIR/torch.csv and DIR/report.md: per batch,
eager_us (the forward called one by one, synchronised once at the end, per forward), graph_us
(the same forward captured with torch.cuda.graph and replayed), device_ms (one eager forward
between events), beside tocha's figures and its floor (bytes over the copy bandwidth).
The DAG: up = F.interpolate(nearest, 2x2); a = silu(cat(up(P5), P4)); n4 = a * (0.5 a);
n3 = gelu(cat(up(n4), P3) + bias[c]) and the loss mean(n3), f32, P5 256x20x20, P4 128x40x40,
P3 64x80x80.
"""
import csv
import sys
import time

import torch
import torch.nn.functional as F

from torch_timing import time_launches

REPS = 200


BIAS = {}


def neck(p5, p4, p3):
    a = F.silu(torch.cat((F.interpolate(p5, scale_factor=2, mode="nearest"), p4), dim=1))
    n4 = a * (a * 0.5)
    h = torch.cat((F.interpolate(n4, scale_factor=2, mode="nearest"), p3), dim=1)
    if h.shape[1] not in BIAS:
        BIAS[h.shape[1]] = torch.zeros(1, h.shape[1], 1, 1, device="cuda")
    n3 = F.gelu(h + BIAS[h.shape[1]])
    return n3, n3.mean()


def per_call_us(fn):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / REPS


def main(out):
    with open(f"{out}/tocha.csv") as f:
        ours = list(csv.DictReader(f))
    rows = []
    for r in ours:
        b = int(r["batch"])
        g = torch.Generator(device="cuda").manual_seed(b)
        inputs = [torch.randn(shape, device="cuda", generator=g)
                  for shape in ((b, 256, 20, 20), (b, 128, 40, 40), (b, 64, 80, 80))]
        eager = per_call_us(lambda: neck(*inputs))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                neck(*inputs)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            neck(*inputs)
        graphed = per_call_us(graph.replay)
        device_ms = time_launches(lambda k: neck(*inputs), REPS)
        rows.append({"batch": b, "eager_us": eager, "graph_us": graphed, "device_ms": device_ms})
        print(f"batch {b:3d}: eager {eager:8.1f} us, graph {graphed:8.1f} us, device {device_ms:.4f} ms")
    with open(f"{out}/torch.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# The neck's top-down path: tocha beside PyTorch {torch.__version__}", "",
             "| batch | tocha forward us | its host part us | launches | launch floor us | host x launch floor | "
             "x torch eager (forward) | "
             "tocha replay us | with input copies us | torch eager us | torch graph us | x torch eager (replay) | "
             "tocha device ms | floor ms | x floor | torch device ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r, t in zip(ours, rows):
        replay, floor, dev = float(r["replay_us"]), float(r["floor_ms"]), float(r["device_ms"])
        forward, launches, launch_us = float(r["forward_us"]), int(r["launches"]), float(r["launch_floor_us"])
        host = float(r["forward_host_us"])
        x_launch = f"{host / (launches * launch_us):.2f}" if launch_us > 0 else "-"
        lines.append(f"| {r['batch']} | {forward:.1f} | {host:.1f} | {launches} | {launch_us:.2f} | {x_launch} | "
                     f"{t['eager_us'] / forward:.2f} | {replay:.1f} | {float(r['replay_copy_us']):.1f} | "
                     f"{t['eager_us']:.1f} | {t['graph_us']:.1f} | {t['eager_us'] / replay:.2f} | {dev:.4f} | "
                     f"{floor:.4f} | {dev / floor:.2f} | {t['device_ms']:.4f} |")
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}/torch.csv and {out}/report.md")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        REPS = int(sys.argv[2])
    main(sys.argv[1] if len(sys.argv) > 1 else "results/tmp-model")
