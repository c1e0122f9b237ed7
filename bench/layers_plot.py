"""The layers benchmark's plot: % of the copy bandwidth per case, tocha beside PyTorch.

    python3 bench/layers_plot.py DIR

Reads DIR/tocha.csv (bench/layers.lua) and DIR/torch.csv (bench/layers_torch.py, which calls
plot() itself after timing) and writes DIR/layers.png with gnuplot, as bench/report.py does:
one panel a dtype, a pair of bars a case (name, pass, x's shape). A PyTorch backward that runs
no kernel (the residual add's) has no bar."""
import argparse
import csv
import os
import subprocess

PASS_SHORT = {"forward": "fwd", "backward": "bwd", "forward+backward": "fwd+bwd"}
# Backwards for which PyTorch's autograd runs no kernel (dy is the gradient itself).
NO_KERNEL = frozenset({("add residual", "backward")})


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def case_keys(rows):
    return [(r["name"], r["pass"], r["dtype"], r["x"]) for r in rows]


def plot(out, ours, theirs):
    """Writes out/layers.png from tocha's rows and PyTorch's (in the same order)."""
    panels = {}
    for a, b in zip(ours, theirs):
        label = f"{a['name']} {PASS_SHORT.get(a['pass'], a['pass'])} {a['x']}"
        theirs_pct = "NaN" if (a["name"], a["pass"]) in NO_KERNEL else f"{float(b['pct_copy']):.2f}"
        panels.setdefault(a["dtype"], []).append(f"{label}\t{float(a['pct_copy']):.2f}\t{theirs_pct}")
    data = os.path.join(out, "layers.dat")
    with open(data, "w") as f:
        for rows in panels.values():
            f.write("\n".join(rows) + "\n\n\n")
    cases = max(len(rows) for rows in panels.values())
    plots = []
    for i, dtype in enumerate(panels):
        plots.append(f'set title "{dtype}: % of device-to-device copy"\n'
                     f'plot "{data}" index {i} using 2:xtic(1) title "tocha", '
                     f'"" index {i} using 3 title "PyTorch", 100 with lines lc rgb "black" notitle')
    script = f"""
set terminal pngcairo size {max(1200, 28 * cases)},{800 * len(panels)} font ",9"
set output "{os.path.join(out, 'layers.png')}"
set datafile separator "\\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -60 scale 0
set ylabel "% of copy"
set yrange [0:*]
set grid ytics
set key outside right top
set bmargin 20
set multiplot layout {len(panels)},1
{chr(10).join(plots)}
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print(f"wrote {out}/layers.png")


def main():
    parser = argparse.ArgumentParser(description="The layers benchmark's plot from DIR/tocha.csv and DIR/torch.csv.")
    parser.add_argument("dir", help="the folder holding tocha.csv and torch.csv")
    opts = parser.parse_args()
    for name in ("tocha.csv", "torch.csv"):
        if not os.path.isfile(os.path.join(opts.dir, name)):
            parser.error(f"{opts.dir}/{name}: no such file")
    ours, theirs = read(os.path.join(opts.dir, "tocha.csv")), read(os.path.join(opts.dir, "torch.csv"))
    if case_keys(ours) != case_keys(theirs):
        raise SystemExit(f"{opts.dir}: tocha.csv and torch.csv hold different cases")
    plot(opts.dir, ours, theirs)


if __name__ == "__main__":
    main()
