"""PyTorch's data-parallel training step of torchvision's ResNet-18 beside tocha's (DIR/tocha.csv
from bench/data_parallel.lua): the plain step on one GPU, then DistributedDataParallel with one
process a GPU (NCCL, channels_last, AdamW, cross entropy on random labels), B images a GPU,
each timed as tocha's: the wall time of N steps after 3 that warm up. Scaling efficiency = the
one-GPU step time / the R-GPU step time. Writes DIR/report.md.

    python3 bench/data_parallel_torch.py DIR [STEPS] [BATCH] [DTYPE]
"""
import csv
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def step_ms(rank, ranks, steps, batch, dtype):
    """Wall milliseconds of a training step on GPU rank (DDP when ranks > 1)."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18().to(f"cuda:{rank}", dtype=dtype, memory_format=torch.channels_last)
    if ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2, fused=True)
    x = torch.randn(batch, 3, 224, 224, device=f"cuda:{rank}", dtype=dtype).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=f"cuda:{rank}")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if ranks > 1:
        dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000 / steps


def worker(rank, ranks, steps, batch, dtype, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29512"
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=ranks)
    ms = step_ms(rank, ranks, steps, batch, dtype)
    if rank == 0:
        queue.put(ms)
    dist.destroy_process_group()


def main():
    out = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    dtype_name = sys.argv[4] if len(sys.argv) > 4 else "f32"
    dtype = DTYPES[dtype_name]
    ranks = torch.cuda.device_count()
    one = step_ms(0, 1, steps, batch, dtype)
    many = None
    if ranks > 1:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, ranks, steps, batch, dtype, queue)) for r in range(ranks)]
        for p in procs:
            p.start()
        many = queue.get()
        for p in procs:
            p.join()
    ours = {int(r["devices"]): r for r in csv.DictReader(open(f"{out}/tocha.csv"))}
    lines = [f"# Data-parallel ResNet-18 training beside PyTorch {torch.__version__} DDP", "",
             f"{ranks} x {torch.cuda.get_device_name(0)}, {batch} images a GPU, {dtype_name}, AdamW; "
             "wall time of a step; scaling efficiency = one GPU's step / R GPUs' step.", "",
             "| GPUs | tocha step ms | tocha images/s | tocha efficiency | PyTorch step ms | PyTorch images/s | PyTorch efficiency |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r, ms in ((1, one), (ranks, many)):
        if ms is None:
            continue
        t = float(ours[r]["step_ms"]) if r in ours else float("nan")
        lines.append(f"| {r} | {t:.3f} | {r * batch / t * 1000:.1f} | {100 * ((float(ours[1]['step_ms']) / t) if 1 in ours else float('nan')):.1f}% | "
                     f"{ms:.3f} | {r * batch / ms * 1000:.1f} | {100 * one / ms:.1f}% |")
        print(lines[-1])
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
