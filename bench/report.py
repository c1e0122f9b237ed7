"""Joins a benchmark run's CSVs into a report: a markdown table and a PNG plot.

    python3 bench/report.py DIR [--title TEXT]

Reads DIR/tocha.csv, DIR/torch.csv and DIR/host.csv (written on the GPU machine by
bench/upsample.lua and bench/upsample_torch.py in one command) and writes DIR/report.md and
DIR/plot.png (gnuplot): a table per group (op and dtype; the README's table is its medians),
then one row per case. Targets: >= 90% of the copy bandwidth measured in the same run.
"""
import csv
import os
import statistics
import subprocess
import sys

TARGET = 90.0

# The x PyTorch targets of issue 4, per group, as op, dtypes, factor.
SPEEDUP_TARGETS = [("forward", ("f32",), 1.9), ("forward", ("f16", "bf16"), 3.0),
                   ("backward", ("f32",), 1.3), ("backward", ("bf16",), 2.5)]
# x PyTorch within this share of its factor counts as noise: a ratio of two medians, each of
# which moves by about a point between runs.
FACTOR_NOISE = 0.015

# Why a case is short of its target, by its shape: the measured reasons and what was tried are
# in docs/performance.md, in the section each names. Keys into REASONS below.
REASONS = {
    "rows-apart": "several output rows per input row that are not whole 16-byte vectors. "
                  "Measured: what costs is rows whose ends are not 16-byte boundaries where a lane "
                  "builds one vector at a time: rows of whole lines with y moved 1-15 bytes lose "
                  "the same 3-9 points, x moved with y so that the spans stay aligned and batched "
                  "takes most of it back (f32 2x2 87.4% -> 93.1%), u8 (never batched there) keeps "
                  "it; DRAM reads and writes the same bytes as at W = 1024 (ncu: no extra traffic), "
                  "in more time. Building each segment once for all rows apart measured within a "
                  "point of building each row (bench/offsets.lua, results/2026-11-30-h200-row-ends-"
                  "probes, results/2026-11-30-h200-rows-apart-tries). Kept: the 16 bytes around "
                  "each row's end in one store (+0.7-2.7 on 2x1 and 3x3); row images for four or "
                  "more rows (+1.5-4.5); shifted 16-byte spans batched (f32 2x1 W=1023 +2.2); the "
                  "lane's next span prefetched into L1 where a lane takes one pack at a time (u8 "
                  "2x1 +3, 2x2 +1-2; 3x3 windows -7, so not there). "
                  "Tried: rows apart as one range of y with every line written by one warp (-8 to "
                  "-25), a row's last segment storing the next row's first line (-1 to -7), the "
                  "single elements loaded before the vectors (-1.5 to -5), the row's end as one "
                  "vector store (-0.5 to -20), every shifted span batched (2x2 -3 to -7), row "
                  "images for two or three rows (-3 to -30), their inputs staged in shared memory "
                  "(-0.2 to -15), lanes sharing shifted loads (-3 to "
                  "-18), bulk copies from shifted images (slower), smaller and larger items, "
                  "register budgets; the TMA cannot store such rows (its stores fault at "
                  "destinations not 16-byte aligned: bench/tma_probe.cu) (docs/performance.md: "
                  "\"Rows apart after v14 (v15, v16)\", \"Row ends (v14)\", \"Row images (v12)\", "
                  "\"What is short, why\").",
    "dy-shifted": "backward rows whose dy and dx are both unaligned: every dy load is a shifted "
                  "span. Tried: 8-byte dx runs (-6 to -8), 40 registers (f16/bf16 3x3: -10; f32 3x3: "
                  "+1-2.4, kept), four dx elements a lane on 3x3 (-1 to -3), lanes sharing their "
                  "loads (-2 to -28), the runs on the "
                  "line grid (-0.5 to -6); kept: each row's tail one element per lane (+1-6) and "
                  "4-byte dx stores (+0.5-0.7 on 3x3) "
                  "(docs/performance.md: \"What is short, why\", \"Whole rows (v13)\").",
    "factor": "the x PyTorch target derives from PyTorch's 2x2 (45% of copy f32 forward, 24-26% "
              "f16/bf16, 65-72% f32 backward, 33% bf16 backward); where PyTorch does better, the "
              "factor asks for the % of copy shown (\"needs\"), against the case's mix floor "
              "(\"floor\"): above the floor it cannot be met by any kernel; under it by less "
              "than about 6 points (forward f32 2x1 and 1x2, where PyTorch reaches 50-52% of copy; "
              "backward f32 3x3, 80%), it asks for more than any case of that direction measures "
              "(forward 94-95%, backward 100-101% at best in these runs; docs/performance.md: "
              "\"What is short, why\"); within 1.5% of the factor, noise.",
    "noise": "within a point of the target, or x PyTorch within 1.5% of its factor (a ratio of "
             "two timings, each with its own noise); run-to-run noise across machines is about 2 "
             "points (docs/performance.md: \"Where it stands\").",
    "unexplained": "short by more than the noise with no measured reason of its shape: a case "
                   "to look into (bench/ncu_probe.sh, bench/ab.sh).",
}


def short_reasons(r, pct, speedup, torch_pct, floor):
    """Why a case is short of its targets: REASONS keys, the factor's with what it needs
    (empty when the case meets them)."""
    keys = []
    op, dt = r["op"], r["dtype"]
    sh, sw, width = int(r["scale_h"]), int(r["scale_w"]), int(r["W"])
    size = {"u8": 1, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}.get(dt, 4)
    row_bytes = width * sw * size if op == "forward" else width * size
    # The reason of the case's shape, for either target. One row per input row (sh == 1) has
    # none: both kernels take the whole tensor as one row whatever the width.
    shape = None
    if sh > 1 and row_bytes % 16:
        shape = "rows-apart" if op == "forward" else "dy-shifted"
    if pct < TARGET:
        if shape:
            keys.append(shape)
        if pct >= TARGET - 1:
            keys.append("noise")
        elif not keys:
            keys.append("unexplained")
    for top, dtypes, factor in SPEEDUP_TARGETS:
        if op == top and dt in dtypes and speedup == speedup and speedup < factor:
            needs = factor * torch_pct
            # The shape is a reason only where some kernel could meet the factor.
            if shape and shape not in keys and needs <= floor:
                keys.append(shape)
            keys.append(f"factor (needs {needs:.1f}%, floor {floor:.1f}%)")
            if speedup >= factor * (1 - FACTOR_NOISE) and "noise" not in keys:
                keys.append("noise")
    return keys


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def key(r):
    return (r["op"], r["dtype"], r["scale_h"], r["scale_w"], r["W"])


def group_table(ours, theirs):
    """One row per op and dtype group (f16 and bf16 together): % of copy and x PyTorch as
    min / median / max, PyTorch's median % of copy, and the cases at the target. The README's
    table is this one's medians."""
    groups = {}
    for r in ours:
        kind = "f16, bf16" if r["dtype"] in ("f16", "bf16") else r["dtype"]
        groups.setdefault((r["op"], kind), []).append(r)
    def spread(values, fmt):
        return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))
    lines = ["| group | % of copy min / median / max | PyTorch % of copy (median) | "
             "x PyTorch min / median / max | cases at target |", "| --- | --- | --- | --- | --- |"]
    for (op, kind), rows in groups.items():
        pct = [float(r["pct_copy"]) for r in rows]
        pairs = [(r, theirs[key(r)]) for r in rows if key(r) in theirs]
        torch = [float(t["pct_copy"]) for _, t in pairs]
        speedup = [float(t["median_ms"]) / float(r["median_ms"]) for r, t in pairs]
        met = sum(p >= TARGET for p in pct)
        lines.append(f"| {op} {kind} | {spread(pct, '{:.1f}')} | "
                     f"{statistics.median(torch):.1f} | {spread(speedup, '{:.2f}')} | "
                     f"{met} of {len(rows)} |" if pairs else
                     f"| {op} {kind} | {spread(pct, '{:.1f}')} | - | - | {met} of {len(rows)} |")
    return lines


def host_lines(host):
    """The host measures against their targets, with the reason for each one short: the
    small call against the driver's own launch measured in the same process, the cold build as
    NVRTC on the host's CPU."""
    def value(key, fmt, unit):
        return fmt.format(host[key]) + " " + unit if key in host else "-"

    def status(key, limit):
        return "-" if key not in host else ("met" if host[key] <= limit else "short")

    lines = ["| host measure | value | target | |", "| --- | --- | --- | --- |",
             f"| one small forward call from Lua (1x16x32x32, 20,000 calls) | "
             f"{value('forward_call_us', '{:.2f}', 'us')} | <= 3 us | {status('forward_call_us', 3.0)} |",
             f"| the same, host side only (batches of 250 calls, drained between) | "
             f"{value('forward_call_host_us', '{:.2f}', 'us')} | | |",
             f"| the driver alone: cuLaunchKernel of an empty kernel, same arguments, same batches | "
             f"{value('driver_launch_us', '{:.2f}', 'us')} | | |",
             f"| cold kernel build (no cache) to first launch | "
             f"{value('cold_build_ms', '{:.1f}', 'ms')} | <= 500 ms | {status('cold_build_ms', 500.0)} |",
             f"| warm (disk cache) new() to first launch | "
             f"{value('warm_first_launch_ms', '{:.2f}', 'ms')} | <= 5 ms | {status('warm_first_launch_ms', 5.0)} |"]
    why = []
    if status("forward_call_us", 3.0) == "short":
        # tocha's call against the driver's, both timed in batches drained between
        call = host.get("forward_call_host_us", host["forward_call_us"])
        driver = host.get("driver_launch_us", float("nan"))
        if driver >= 3.0:
            why.append(f"- small call: the driver's own cuLaunchKernel takes {driver:.2f} us in the same "
                       f"process, above the 3 us target, so no call through it can meet it on this "
                       f"host; tocha's call, timed the same way, is {call - driver:+.2f} us from it "
                       f"(docs/performance.md: \"Next\", the host cost of a small launch).")
        else:
            why.append(f"- small call: tocha's call, timed as the driver's, is {call - driver:+.2f} us "
                       f"from the driver's own {driver:.2f} us cuLaunchKernel in the same process: "
                       f"what tocha adds is what is short (docs/performance.md: \"Next\", the host "
                       f"cost of a small launch).")
    if status("cold_build_ms", 500.0) == "short":
        why.append("- cold build: NVRTC compiling the kernel on this host's CPU, which differs from "
                   "machine to machine (docs/performance.md: \"Where it stands\").")
    if why:
        lines += ["", "Host measures short of a target:", ""] + why
    return lines


def main(out, title):
    ours = read(os.path.join(out, "tocha.csv"))
    theirs = {key(r): r for r in read(os.path.join(out, "torch.csv"))}
    host = {r["measure"]: float(r["value"]) for r in read(os.path.join(out, "host.csv"))}
    copy = float(ours[0]["copy_gbps"])
    lines = [f"# {title}", "",
             f"Device-to-device copy in this run: {copy:.0f} GB/s (read + written). "
             f"Target: >= {TARGET:.0f}% of it.", "",
             "The mix floor is the case's input at the read-only rate plus its output at the "
             "write-only rate (16-byte streams measured in the same run), as % of copy: what a "
             "kernel that only moves those bytes could reach.", ""]
    lines += group_table(ours, theirs) + ["",
             "| op | dtype | scale | W | block | tocha ms | tocha GB/s | % copy | mix floor % | torch ms | torch % copy | x torch | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    plot_rows = []
    met = 0
    why = []
    for i, r in enumerate(ours):
        t = theirs.get(key(r))
        pct = float(r["pct_copy"])
        ok = pct >= TARGET
        met += ok
        speedup = float(t["median_ms"]) / float(r["median_ms"]) if t else float("nan")
        floor = float(r.get("mix_floor_pct_copy") or "nan")
        lines.append(
            f"| {r['op']} | {r['dtype']} | {r['scale_h']}x{r['scale_w']} | {r['W']} | {r['block']} | "
            f"{float(r['median_ms']):.3f} | {float(r['gbps']):.0f} | {pct:.1f} | {floor:.1f} | "
            f"{float(t['median_ms']):.3f} | {float(t['pct_copy']):.1f} | {speedup:.2f} | "
            f"{'met' if ok else 'short'} |" if t else
            f"| {r['op']} | {r['dtype']} | {r['scale_h']}x{r['scale_w']} | {r['W']} | {r['block']} | "
            f"{float(r['median_ms']):.3f} | {float(r['gbps']):.0f} | {pct:.1f} | {floor:.1f} | - | - | - | "
            f"{'met' if ok else 'short'} |")
        keys = short_reasons(r, pct, speedup, float(t["pct_copy"]) if t else float("nan"), floor)
        if keys:
            why.append(f"| {r['op']} {r['dtype']} {r['scale_h']}x{r['scale_w']} W={r['W']} | {pct:.1f} | "
                       f"{speedup:.2f} | {', '.join(keys)} |")
        plot_rows.append((i, pct, float(t["pct_copy"]) if t else 0.0,
                          f"{r['op'][0]}{r['dtype']} {r['scale_h']}x{r['scale_w']} {r['W']}"))
    lines += ["", f"{met} of {len(ours)} cases at >= {TARGET:.0f}% of copy.", ""]
    if why:
        lines += ["## Cases short of a target: why, and what was tried", "",
                  "Targets: >= 90% of copy; x PyTorch >= " +
                  ", ".join(f"{f}x for {op} {'/'.join(d)}" for op, d, f in SPEEDUP_TARGETS) + ".", "",
                  "| case | % copy | x torch | reasons |", "| --- | --- | --- | --- |"] + why + [""]
        lines += [f"- {k}: {text}" for k, text in REASONS.items()] + [""]
    lines += [
              f"16-byte streams in this run: write-only {host.get('write_only_pct_copy', float('nan')):.1f}% "
              f"of copy, read-only {host.get('read_only_pct_copy', float('nan')):.1f}%.", ""] + host_lines(host)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    data = os.path.join(out, "plot.dat")
    with open(data, "w") as f:
        for i, a, b, label in plot_rows:
            f.write(f'{i} {a:.2f} {b:.2f} "{label}"\n')
    script = f"""
set terminal pngcairo size 1800,700 font ",9"
set output "{os.path.join(out, 'plot.png')}"
set title "{title}: % of device-to-device copy bandwidth"
set ylabel "% of copy"
set yrange [0:110]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by 90 right font ",7"
set key top right
set grid ytics
plot "{data}" using 2:xtic(4) title "tocha", "" using 3 title "PyTorch", {TARGET} with lines lw 2 dt 2 title "target"
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print(f"wrote {out}/report.md and {out}/plot.png: {met} of {len(ours)} cases at target")


if __name__ == "__main__":
    args = sys.argv[1:]
    title = "tocha nearest upsample"
    if "--title" in args:
        i = args.index("--title")
        title = args[i + 1]
        del args[i:i + 2]
    main(args[0] if args else "results/tmp", title)
