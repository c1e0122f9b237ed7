"""Device timing for the PyTorch peers of the benchmarks (bench/*_torch.py), measured as
bench/timing.lua measures tocha: the median of device-event times around each launch, the device held busy just before
each (torch.cuda._sleep, as bench/timing.lua's hold_device) so that the events time the
device's work and not the host's pace, after a warm-up of five. time_cases serves the
memory-bound benchmarks (GB/s), time_flop_cases the compute-bound ones (TFLOP/s)."""
import csv
import statistics

import torch


HOLD_CYCLES = 4000000  # bench/timing.lua's M.HOLD_CYCLES


def time_launches(fn, n):
    """Median milliseconds of fn(k) over n launches, each between two events, the device held
    busy for HOLD_CYCLES just before."""
    for k in range(5):
        fn(k)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for k in range(n):
        torch.cuda._sleep(HOLD_CYCLES)
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


def time_cases(out, case_ms, describe):
    """PyTorch's time for each case of out/tocha.csv: case_ms(row) milliseconds each, written to
    out/torch.csv with tocha's columns (ms, gbps and pct_copy PyTorch's, from the row's bytes);
    describe(row) names a case in the progress lines. Returns tocha's rows, PyTorch's and the
    copy bandwidth."""
    with open(f"{out}/tocha.csv") as f:
        ours = list(csv.DictReader(f))
    copy = copy_bandwidth()
    print(f"torch {torch.__version__}: device-to-device copy {copy:.1f} GB/s")
    theirs = []
    for r in ours:
        ms = case_ms(r)
        t = dict(r)
        t["ms"] = ms
        t["gbps"] = int(r["bytes"]) / (ms * 1e6)
        t["pct_copy"] = 100 * t["gbps"] / copy
        theirs.append(t)
        print(f"{describe(r)} {ms:9.4f} ms {t['pct_copy']:6.1f}% of copy")
    with open(f"{out}/torch.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ours[0].keys()))
        w.writeheader()
        w.writerows(theirs)
    return ours, theirs, copy


def time_flop_cases(out, case_ms, describe):
    """PyTorch's time for each case of out/tocha.csv, counted in TFLOP/s from the row's flops:
    case_ms(row) gives milliseconds, or (milliseconds, {column: value}) to add columns of its own
    (conv's layout); the rows are written to out/torch.csv with tocha's columns, ms and tflops
    PyTorch's. describe(row) names a case in the progress lines. Returns tocha's rows and
    PyTorch's."""
    with open(f"{out}/tocha.csv") as f:
        ours = list(csv.DictReader(f))
    theirs = []
    for r in ours:
        got = case_ms(r)
        ms, extra = got if isinstance(got, tuple) else (got, {})
        t = dict(r)
        t["ms"], t["tflops"] = ms, float(r["flops"]) / (ms * 1e9)
        t.update(extra)
        theirs.append(t)
        print(f"{describe(r)} {ms:9.4f} ms {t['tflops']:8.2f} TFLOP/s", *extra.values())
    with open(f"{out}/torch.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(theirs[0].keys()))
        w.writeheader()
        w.writerows(theirs)
    return ours, theirs


def write_report(out, lines):
    """Writes lines to out/report.md and prints them."""
    with open(f"{out}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
