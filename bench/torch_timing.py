"""Device timing for the PyTorch peers of the benchmarks (bench/upsample_torch.py,
bench/elementwise_torch.py), measured as bench/timing.lua measures tocha: the median of
device-event times around each launch, after a warm-up of five."""
import statistics

import torch


def time_launches(fn, n):
    """Median milliseconds of fn(k) over n launches, each between two events."""
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
    """Device-to-device copy bandwidth in GB/s, bytes read plus written, over 1 GiB."""
    n = 256 * 2**20
    src = torch.ones(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = time_launches(lambda k: dst.copy_(src), 20)
    return 2 * n * 4 / (ms * 1e6)
