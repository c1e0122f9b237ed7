#!/bin/sh
# bench/ncu_probe.sh: one ncu measurement per upsample case, the few counters that tell where
# a case's time goes, printed as "metric unit value" lines under a "== CASE" header.
#
#   sh bench/ncu_probe.sh BUILD "forward f16 3 3 1020" "forward f16 3 3 1024" ...
#
# Each CASE is bench/profile_case.lua's arguments (OP DTYPE SCALE_H SCALE_W W [BLOCK [X_OFF
# Y_OFF]]: with byte offsets, the forward through packed launches). ncu runs with
# --clock-control none (the clocks the benchmark sees) on the third launch of the case, and
# reports: time; DRAM bytes read and written, DRAM, L2 and L1 throughput; instructions; L1 and
# L2 requests by direction, L1 sectors and L1 load hits; resident and eligible warps; cycles
# per instruction and the stall reasons that take at least 0.3 of them; registers. Needs ncu
# and python3 on the GPU machine.
set -eu
build="${1:?usage: ncu_probe.sh BUILD CASE...}"; shift
metrics="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
metrics="$metrics,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active"
metrics="$metrics,smsp__inst_executed.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_write.sum"
metrics="$metrics,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
metrics="$metrics,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
metrics="$metrics,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
metrics="$metrics,smsp__warps_eligible.avg.per_cycle_active,smsp__average_warp_latency_per_inst_issued.ratio"
metrics="$metrics,launch__registers_per_thread,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
for case in "$@"; do
  echo "== $case"
  # shellcheck disable=SC2086 # the case is several arguments
  ncu --clock-control none -k regex:upsample --launch-skip 2 --launch-count 1 --metrics "$metrics" \
    --csv --page raw "$build/tocha" bench/profile_case.lua $case 2>&1 | python3 -c '
import csv, re, sys
wanted = set(sys.argv[1].split(","))
text = sys.stdin.read().splitlines()
rows = list(csv.reader(line for line in text if line.startswith("\"")))
if len(rows) < 3:
    sys.exit("ncu_probe.sh: no measurement; the last of what ncu printed:\n" + "\n".join(text[-5:]))
for name, unit, value in zip(*rows[:3]):
    stall = re.fullmatch(r"smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio", name)
    if name in wanted or (stall and float(value.replace(",", "") or 0) >= 0.3):
        print(name, unit, value)
' "$metrics"
done
