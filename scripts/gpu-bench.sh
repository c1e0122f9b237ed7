#!/bin/sh
# scripts/gpu-bench.sh: the benchmark of record on a GPU machine, in one command: tocha's
# cases (bench/upsample.lua), PyTorch on the same cases (bench/upsample_torch.py) and the
# report (bench/report.py, against BASELINE's rows when given), all into DIR.
#
#   sh scripts/gpu-bench.sh BUILD DIR [SUITE...] [-- BASELINE]
#
# SUITE: rows, shapes, sweep (default: all three). Each suite's cases are timed by tocha and
# then by PyTorch in the same command, so that both share the machine and its clocks.
set -eu
build="${1:?usage: gpu-bench.sh BUILD DIR [SUITE...] [-- BASELINE]}"; dir="${2:?dir}"; shift 2
suites=""; baseline=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then baseline="${2:-}"; break; fi
  suites="$suites --suite $1"; shift
done
mkdir -p "$dir"
# shellcheck disable=SC2086
"$build/tocha" bench/upsample.lua --out "$dir" $suites > "$dir/tocha.log" 2>&1
PYTHONUNBUFFERED=1 python3 bench/upsample_torch.py "$dir" > "$dir/torch.log" 2>&1
if [ -n "$baseline" ]; then python3 bench/report.py "$dir" --baseline "$baseline"
else python3 bench/report.py "$dir"; fi
