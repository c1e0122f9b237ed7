"""PyTorch's optimizer steps on the shapes of bench/optim.lua: AdamW(fused=True) and
SGD(momentum=0.9, foreach=True) over ResNet-18's parameters (torchvision's, f32), timed as
bench/timing.lua times tocha; writes DIR/report.md beside tocha's figures.

    python3 bench/optim_torch.py DIR [LAUNCHES]
"""
import csv
import sys

import torch
import torchvision

from torch_timing import copy_bandwidth, time_launches


def main():
    out = sys.argv[1]
    launches = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    copy = copy_bandwidth()
    model = torchvision.models.resnet18().cuda()
    params = list(model.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    n = sum(p.numel() for p in params)
    ours = {r["name"]: r for r in csv.DictReader(open(f"{out}/tocha.csv"))}
    lines = [f"# Optimizer steps beside PyTorch {torch.__version__} ({torch.cuda.get_device_name()})", "",
             f"ResNet-18's {len(params)} parameters, {n} elements, f32. Copy {copy:.1f} GB/s; the floor is the step's bytes at that rate.", "",
             "| optimizer | tocha ms | PyTorch ms | floor ms | tocha / floor | PyTorch / floor | tocha / PyTorch time |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, make, words in (("AdamW", lambda: torch.optim.AdamW(params, lr=1e-3, fused=True), 7),
                              ("SGD", lambda: torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True), 5)):
        opt = make()
        ms = time_launches(lambda k: opt.step(), launches)
        floor = words * 4 * n / (copy * 1e6)
        t = float(ours[name]["ms"]) if name in ours else float("nan")
        lines.append(f"| {name} | {t:.4f} | {ms:.4f} | {floor:.4f} | {t / floor:.2f} | {ms / floor:.2f} | {t / ms:.2f} |")
        print(lines[-1])
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
