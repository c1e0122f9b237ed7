"""The convolution benchmark's plot: TFLOP/s per case, tocha beside PyTorch (cuDNN).

    python3 bench/conv_plot.py DIR [DTYPE]

Reads DIR/tocha.csv (bench/conv.lua) and DIR/torch.csv (bench/conv_torch.py) and writes
DIR/conv.png with gnuplot: one panel an op, pass and tocha layout (conv forward NHWC, ...), a
pair of bars a case and batch, for one dtype (default bf16; f16 runs within a few percent of
it): TFLOP/s, or GB/s for the memory-bound depthwise rows. PyTorch's bar is its faster
layout's in every panel."""
import argparse
import csv
import os
import subprocess


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def plot(out, ours, theirs, dtype):
    panels = {}
    for a, b in zip(ours, theirs):
        if a["dtype"] != dtype:
            continue
        op = a.get("op", "conv")
        unit = "gbps" if op == "depthwise" else "tflops"
        key = f"{op} {a['pass']} {a['layout'].upper()}: {'GB/s' if unit == 'gbps' else 'TFLOP/s'}"
        panels.setdefault(key, []).append(f"{a['name']} n{a['n']}\t{float(a[unit]):.2f}\t{float(b[unit]):.2f}")
    data = os.path.join(out, "conv.dat")
    with open(data, "w") as f:
        for rows in panels.values():
            f.write("\n".join(rows) + "\n\n\n")
    cases = max(len(rows) for rows in panels.values())
    plots = []
    for i, key in enumerate(panels):
        plots.append(f'set title "{dtype} {key} (PyTorch in its faster layout)"\n'
                     f'plot "{data}" index {i} using 2:xtic(1) title "tocha", "" index {i} using 3 title "PyTorch"')
    script = f"""
set terminal pngcairo size {max(1200, 26 * cases)},{700 * len(panels)} font ",9"
set output "{os.path.join(out, 'conv.png')}"
set datafile separator "\\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -60 scale 0
set yrange [0:*]
set grid ytics
set key outside right top
set bmargin 18
set multiplot layout {len(panels)},1
{chr(10).join(plots)}
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print(f"wrote {out}/conv.png")


def main():
    parser = argparse.ArgumentParser(description="The convolution benchmark's plot from DIR/tocha.csv and DIR/torch.csv.")
    parser.add_argument("dir", help="the folder holding tocha.csv and torch.csv")
    parser.add_argument("dtype", nargs="?", default="bf16", help="the dtype to plot (bf16)")
    opts = parser.parse_args()
    for name in ("tocha.csv", "torch.csv"):
        if not os.path.isfile(os.path.join(opts.dir, name)):
            parser.error(f"{opts.dir}/{name}: no such file")
    ours, theirs = read(os.path.join(opts.dir, "tocha.csv")), read(os.path.join(opts.dir, "torch.csv"))
    keys = [(r["name"], r["pass"], r["dtype"], r["layout"], r["n"]) for r in ours]
    if keys != [(r["name"], r["pass"], r["dtype"], r["layout"], r["n"]) for r in theirs]:
        raise SystemExit(f"{opts.dir}: tocha.csv and torch.csv hold different cases")
    plot(opts.dir, ours, theirs, opts.dtype)


if __name__ == "__main__":
    main()
