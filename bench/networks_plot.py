"""The network benchmark's plot: time per forward, tocha's graph replay beside PyTorch's eager
forward, CUDA graph and channels_last, a panel a batch size, a cluster a network and dtype.

    python3 bench/networks_plot.py DIR

Reads the table of DIR/report.md (bench/networks_torch.py time DIR writes it: the run's
record, tocha's and PyTorch's figures side by side) and writes DIR/networks.png with gnuplot.
Milliseconds, lower is faster; each panel on its own scale."""
import argparse
import os
import subprocess

COLUMNS = ("tocha graph ms", "torch eager ms", "torch graph ms", "torch channels_last ms")
TITLES = ("tocha (graph replay)", "PyTorch eager", "PyTorch CUDA graph", "PyTorch channels-last")


def read_table(path):
    """The report's table as a list of dicts (header cell -> text)."""
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip().startswith("|")]
    if len(lines) < 3:
        raise SystemExit(f"{path}: no table")
    cells = lambda line: [c.strip() for c in line.strip("|").split("|")]
    header = cells(lines[0])
    missing = [c for c in ("network", "batch", "dtype") + COLUMNS if c not in header]
    if missing:
        raise SystemExit(f"{path}: the table lacks {', '.join(missing)}")
    return [dict(zip(header, cells(line))) for line in lines[2:]]


def plot(out, rows):
    panels = {}
    for r in rows:
        values = "\t".join(f"{float(r[c]):.4f}" for c in COLUMNS)
        panels.setdefault(r["batch"], []).append(f"{r['network']} {r['dtype']}\t{values}")
    data = os.path.join(out, "networks.dat")
    with open(data, "w") as f:
        for batch_rows in panels.values():
            f.write("\n".join(batch_rows) + "\n\n\n")
    plots = []
    for i, batch in enumerate(panels):
        series = [f'"{data}" index {i} using {2 + k}{":xtic(1)" if k == 0 else ""} title "{t}"'
                  for k, t in enumerate(TITLES)]
        plots.append(f'set title "batch {batch}: ms a forward (lower is faster)"\nplot ' + ", ".join(series))
    script = f"""
set terminal pngcairo size 1100,{480 * len(panels)} font ",10"
set output "{os.path.join(out, 'networks.png')}"
set datafile separator "\\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid ytics
set key outside right top
set multiplot layout {len(panels)},1
{chr(10).join(plots)}
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    print(f"wrote {out}/networks.png")


def main():
    parser = argparse.ArgumentParser(description="The network benchmark's plot from DIR/report.md.")
    parser.add_argument("dir", help="the folder holding report.md")
    opts = parser.parse_args()
    path = os.path.join(opts.dir, "report.md")
    if not os.path.isfile(path):
        parser.error(f"{path}: no such file")
    plot(opts.dir, read_table(path))


if __name__ == "__main__":
    main()
