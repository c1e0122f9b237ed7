#!/bin/sh
# Runs every spec through CTest and shows, for each, busted's summary line; a failing spec
# shows its whole output. GPU specs report as not run where there is no GPU.
set -eu
build="${1:-build}"
log="$build/ctest-output.log"
status=0
ctest --test-dir "$build" --output-on-failure -V >"$log" 2>&1 || status=$?
# Keep the lines a reader needs: each test's result, busted's summary, skips and failures.
grep -E '^[0-9]+: [0-9]+ success|^[0-9]+: [0-9]+ passed, [0-9]+ failed|Test +#[0-9]+:|tests passed|tests failed|did not run|Not Run|Skipped|\*\*\*Failed|Error|Failure|^[0-9]+: tocha' "$log" |
  grep -vE '^[0-9]+: (Test command|Environment)' || true
if [ "$status" -ne 0 ]; then
  for n in $(grep -E 'Test +#[0-9]+:.*(\*\*\*Failed|Timeout|Exception)' "$log" | sed -E 's/.*Test +#([0-9]+):.*/\1/'); do
    echo "--- output of test $n (whole log: $log) ---"
    grep -E "^$n: " "$log" | tail -n 150
  done
fi
exit "$status"
