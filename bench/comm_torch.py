"""PyTorch's all-reduce on the sizes of bench/comm.lua, beside tocha's (DIR/tocha.csv): NCCL from
one process over every GPU (torch.cuda.nccl.all_reduce, the model tocha.comm follows) and
torch.distributed's all_reduce with one process a GPU (what DDP uses), each timed as bench/comm.lua
times tocha: the wall time of N calls after 3 that warm up, every GPU synchronized after the last.
Bus bandwidth as nccl-tests computes it: bytes x 2 (R - 1) / R / time. Writes DIR/report.md.

    python3 bench/comm_torch.py DIR [CALLS]
"""
import csv
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [2 ** 20, 2 ** 22, 2 ** 24, 2 ** 26, 2 ** 28]


def synchronize_all(ranks):
    for r in range(ranks):
        torch.cuda.synchronize(r)


def wall_ms(fn, calls, ranks):
    for _ in range(3):
        fn()
    synchronize_all(ranks)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize_all(ranks)
    return (time.perf_counter() - start) * 1000 / calls


def one_process(calls, ranks):
    """torch.cuda.nccl.all_reduce over a tensor on each of the first `ranks` GPUs, from this
    process."""
    times = {}
    for size in SIZES:
        tensors = [torch.rand(size // 4, device=f"cuda:{r}") for r in range(ranks)]
        times[size] = wall_ms(lambda: torch.cuda.nccl.all_reduce(tensors), calls, ranks)
        del tensors
    return times


def worker(rank, ranks, calls, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=ranks)
    times = {}
    for size in SIZES:
        t = torch.rand(size // 4, device=f"cuda:{rank}")
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        times[size] = (time.perf_counter() - start) * 1000 / calls
        del t
    if rank == 0:
        queue.put(times)
    dist.destroy_process_group()


def one_process_a_gpu(calls, ranks):
    """torch.distributed's all_reduce, one process on each of the first `ranks` GPUs (NCCL)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, ranks, calls, 29511, queue)) for r in range(ranks)]
    for p in procs:
        p.start()
    times = queue.get()
    for p in procs:
        p.join()
    return times


def main():
    out = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ours, ranks = {}, torch.cuda.device_count()
    for r in csv.DictReader(open(f"{out}/tocha.csv")):
        ours[(r["path"], int(r["bytes"]))] = float(r["ms"])
        ranks = int(r["ranks"])  # the ranks tocha ran over (bench/comm.lua --devices)
    single = one_process(calls, ranks)
    multi = one_process_a_gpu(calls, ranks) if ranks > 1 else {}

    def busbw(size, ms):
        return size * 2 * (ranks - 1) / ranks / (ms * 1e6) if ms and ms == ms else float("nan")

    names = ", ".join(torch.cuda.get_device_name(r) for r in range(ranks))
    lines = [f"# All-reduce beside PyTorch {torch.__version__} (NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})",
             "", f"{ranks} GPUs: {names}. f32 sum; bus bandwidth GB/s as nccl-tests computes it.", "",
             "| size | tocha NCCL ms | tocha busbw | torch.cuda.nccl busbw | torch.distributed busbw | tocha / best | tocha staged busbw |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for size in SIZES:
        t = ours.get(("nccl", size), float("nan"))
        staged = ours.get(("staged", size), float("nan"))
        best = max(busbw(size, single[size]), busbw(size, multi.get(size)) if multi else 0)
        ratio = busbw(size, t) / best if best else float("nan")
        lines.append(f"| {size // 2 ** 20} MiB | {t:.4f} | {busbw(size, t):.1f} | {busbw(size, single[size]):.1f} | "
                     f"{busbw(size, multi.get(size)) if multi else float('nan'):.1f} | {100 * ratio:.1f}% | {busbw(size, staged):.1f} |")
        print(lines[-1])
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
