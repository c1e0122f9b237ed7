"""Joins a benchmark run's CSVs into a report: markdown tables and a PNG plot.

    python3 bench/report.py DIR [--title TEXT] [--baseline DIR]

Reads DIR/tocha.csv, DIR/torch.csv and DIR/host.csv (written on the GPU machine by
bench/upsample.lua and bench/upsample_torch.py in one command) and writes DIR/report.md and
DIR/plot.png (gnuplot, the sweep's % of copy against W and C). The targets, per case:
- x PyTorch >= 1: no case slower than PyTorch (PyTorch's median time over tocha's);
- a case that moves >= 64 MB: >= 85% of the copy bandwidth measured in the same run, and
  >= 90% for the rows suite at W = 1024;
- a smaller case: time <= 1.3 x max(launch floor, bytes / copy bandwidth), the floor being an
  empty kernel's launch to completion measured in the same run;
- with --baseline DIR (an earlier run's tocha.csv): no rows case more than 1 point of copy
  below its baseline.
A ratio of two medians moves by about a point between runs: a case within 1% of a target is
marked noise, not short.
Beside each case stands a device-to-device copy that moves the same bytes, timed the same way
(tocha.csv's same_copy_ms, where the run has it), as % of the copy bandwidth: what a kernel of
that size reaches at best once the fixed costs of a launch (its start, the ramp up and the tail
of the grid) are paid.
"""
import csv
import os
import subprocess
import sys

BIG = 64 * 2**20
BIG_TARGET = 85.0
LONG_ROWS_TARGET = 90.0
SMALL_FACTOR = 1.3
BASELINE_LOSS = 1.0
NOISE = 0.01


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def key(r):
    """A case's identity; rows of runs from before the suites are the rows suite's, NCHW."""
    name = r.get("name") or f"{r['scale_h']}x{r['scale_w']} W={r['W']}"
    return (r.get("suite") or "rows", name, r["op"], r["dtype"], r.get("layout") or "nchw",
            r["scale_h"], r["scale_w"], r["W"])


def label(r):
    return f"{r['op']} {r['dtype']} {r['layout']} {r['name']}"


def verdicts(r, t, base, copy, floor_us):
    """The case's targets as (name, wanted, got, state), state 'met', 'noise' or 'short'."""
    ms, bytes_ = float(r["median_ms"]), int(r["bytes"])
    out = []

    def judge(name, wanted, got, higher_is_better=True):
        ok = got >= wanted if higher_is_better else got <= wanted
        near = got >= wanted * (1 - NOISE) if higher_is_better else got <= wanted * (1 + NOISE)
        out.append((name, wanted, got, "met" if ok else "noise" if near else "short"))

    if t:
        judge("x PyTorch", 1.0, float(t["median_ms"]) / ms)
    if bytes_ >= BIG:
        wanted = LONG_ROWS_TARGET if r["suite"] == "rows" and r["W"] == "1024" else BIG_TARGET
        judge("% of copy", wanted, float(r["pct_copy"]))
    else:
        limit_us = SMALL_FACTOR * max(floor_us, bytes_ / (copy * 1e3))
        judge("us", limit_us, ms * 1e3, higher_is_better=False)
    if base and r["suite"] == "rows":
        judge("% of copy vs baseline", float(base["pct_copy"]) - BASELINE_LOSS, float(r["pct_copy"]))
    return out


def same_copy_pct(r):
    """% of copy that a copy of the case's bytes reaches, as text ('-' where not measured)."""
    if not r.get("same_copy_ms"):
        return "-"
    return f"{int(r['bytes']) / (float(r['same_copy_ms']) * 1e6) / float(r['copy_gbps']) * 100:.1f}"


def case_line(r, t, marks):
    torch = f"{float(t['median_ms']) * 1e3:.1f} | {float(t['pct_copy']):.1f} | " \
            f"{float(t['median_ms']) / float(r['median_ms']):.2f}" if t else "- | - | -"
    shape = f"{r['B']}x{r['C']}x{r['H']}x{r['W']}"
    return (f"| {label(r)} | {shape} | {int(r['bytes']) / 2**20:.1f} | {r['block']} | "
            f"{float(r['median_ms']) * 1e3:.1f} | {float(r['pct_copy']):.1f} | {same_copy_pct(r)} | "
            f"{torch} | {marks} |")


def main(out, title, baseline):
    ours = read(os.path.join(out, "tocha.csv"))
    theirs = {key(r): r for r in read(os.path.join(out, "torch.csv"))}
    host = {r["measure"]: float(r["value"]) for r in read(os.path.join(out, "host.csv"))}
    base = {key(r): r for r in read(os.path.join(baseline, "tocha.csv"))} if baseline else {}
    copy, floor_us = host["copy_gbps"], host["launch_floor_us"]
    lines = [f"# {title}", "",
             f"Device-to-device copy in this run: {copy:.0f} GB/s (read + written); launch floor "
             f"(an empty kernel, launch to completion): {floor_us:.2f} us.", "",
             f"Targets: x PyTorch >= 1; cases of >= 64 MB at >= {BIG_TARGET:.0f}% of copy (rows "
             f"W=1024: >= {LONG_ROWS_TARGET:.0f}%); smaller cases in <= {SMALL_FACTOR} x max(launch "
             f"floor, bytes / copy)" + ("; rows cases within 1 point of the baseline" if base else "") +
             ". Within 1% of a target: noise.", ""]
    summary = {}
    tables = {}
    short = []
    for r in ours:
        t = theirs.get(key(r))
        marks = verdicts(r, t, base.get(key(r)), copy, floor_us)
        s = summary.setdefault(r["suite"], {"cases": 0, "met": 0, "slower": 0})
        s["cases"] += 1
        s["met"] += all(m[3] != "short" for m in marks)
        s["slower"] += any(m[0] == "x PyTorch" and m[3] == "short" for m in marks)
        text = ", ".join(f"{m[0]} {m[2]:.2f} (target {m[1]:.2f}): {m[3]}" for m in marks if m[3] != "met")
        tables.setdefault(r["suite"], []).append(case_line(r, t, text or "met"))
        if any(m[3] == "short" for m in marks):
            short.append(f"- {r['suite']} {label(r)}: {text}; a copy of the same bytes: {same_copy_pct(r)}% of copy")
    lines += ["| suite | cases | every target met | slower than PyTorch |", "| --- | --- | --- | --- |"]
    lines += [f"| {name} | {s['cases']} | {s['met']} | {s['slower']} |" for name, s in summary.items()]
    for name, rows in tables.items():
        lines += ["", f"## {name}", "",
                  "| case | B x C x H x W | MB | block | tocha us | % copy | same-bytes copy % | torch us | "
                  "torch % copy | x torch | targets |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"] + rows
    lines += ["", "## Short of a target", ""] + (short or ["None."])
    host_rows = [("copy_gbps", "device-to-device copy, GB/s"), ("launch_floor_us", "launch floor, us"),
                 ("write_only_pct_copy", "16-byte write-only stream, % of copy"),
                 ("read_only_pct_copy", "16-byte read-only stream, % of copy"),
                 ("forward_call_us", "one small forward call from Lua (1x16x32x32), us"),
                 ("forward_call_host_us", "the same into a given output, host side only, us"),
                 ("forward_alloc_call_host_us", "the same with a new output each call, host side only, us"),
                 ("driver_launch_us", "the driver alone: cuLaunchKernel of an empty kernel, us"),
                 ("chain_direct_launch_us", "a chain of 100 of those launches, one call each: us per launch"),
                 ("chain_graph_launch_us", "the chain replayed as a graph: us per launch"),
                 ("cold_build_ms", "cold kernel build to first launch, ms"),
                 ("warm_first_launch_ms", "warm (disk cache) new() to first launch, ms")]
    torch_host = {}
    torch_host_path = os.path.join(out, "torch_host.csv")
    if os.path.exists(torch_host_path):
        for r in read(torch_host_path):
            try:
                torch_host[r["measure"]] = float(r["value"])
            except ValueError:
                pass
    lines += ["", "| host measure | tocha | PyTorch |", "| --- | --- | --- |"]
    lines += [f"| {text} | {host[k]:.2f} | " + (f"{torch_host[k]:.2f}" if k in torch_host else "-") + " |"
              for k, text in host_rows if k in host]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(out, title, ours, theirs)
    met = sum(s["met"] for s in summary.values())
    print(f"wrote {out}/report.md and {out}/plot.png: {met} of {len(ours)} cases meet every target")


def plot(out, title, ours, theirs):
    """The sweep's % of copy against W (NCHW) and C (NHWC), tocha and PyTorch, per op and dtype."""
    series = {}
    for r in ours:
        if r["suite"] != "sweep":
            continue
        x = int(r["W"] if r["layout"] == "nchw" else r["C"])
        t = theirs.get(key(r))
        name = f"{r['op']} {r['dtype']} {r['layout']}"
        series.setdefault(name, []).append((x, float(r["pct_copy"]), float(t["pct_copy"]) if t else 0.0))
    data = os.path.join(out, "plot.dat")
    with open(data, "w") as f:
        for name, points in series.items():
            f.write(f'"{name}"\n')
            for x, a, b in sorted(points):
                f.write(f"{x} {a:.2f} {b:.2f}\n")
            f.write("\n\n")
    plots = ", ".join(
        f'"{data}" index {i} using 1:2 with linespoints title "tocha {n}", '
        f'"{data}" index {i} using 1:3 with lines dt 2 title "PyTorch {n}"'
        for i, n in enumerate(series)) or "0 notitle"
    script = f"""
set terminal pngcairo size 1400,800 font ",9"
set output "{os.path.join(out, 'plot.png')}"
set title "{title}: the sweep, % of device-to-device copy (x: W for NCHW, C for NHWC)"
set ylabel "% of copy"
set logscale x 2
set yrange [0:110]
set key outside right
set grid
plot {plots}, {BIG_TARGET} with lines lw 2 lc rgb "black" title "target"
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)


if __name__ == "__main__":
    args = sys.argv[1:]
    opts = {"--title": "tocha nearest upsample", "--baseline": None}
    for name in opts:
        if name in args:
            i = args.index(name)
            opts[name] = args[i + 1]
            del args[i:i + 2]
    main(args[0] if args else "results/tmp", opts["--title"], opts["--baseline"])
