#!/bin/sh
# On a machine with a GPU: runs the #gpu specs under compute-sanitizer's memcheck, racecheck
# and initcheck, one busted run per tool over every spec with GPU tests, forced onto cuda.
# Host backtraces are off (--show-backtrace device): to record one for each CUDA call the
# tool unwinds the host stack with libgcc, which aborts the process (SIGABRT, no message) when
# the call came from code that LuaJIT compiled, since those frames carry no unwind tables.
# Any sanitizer error fails the run (its exit code is non-zero); each tool's full report goes
# to DIR/<tool>.log.
#   sh scripts/gpu-sanitize.sh BUILD [DIR] [TOOLS...]
set -u
build="${1:?usage: gpu-sanitize.sh BUILD [DIR] [TOOLS...]}"
dir="${2:-$build/sanitizer-logs}"
[ $# -ge 2 ] && shift 2 || shift $#
tools="${*:-memcheck racecheck initcheck}"
mkdir -p "$dir"
src="$(pwd)"
export LUA_PATH="$src/lua/?.lua;$src/lua/?/init.lua;$src/bindings/?.lua;$src/$build/lua/?.lua;$src/spec/?.lua;;"
export TOCHA_CACHE_DIR="$src/$build/kernel-cache" TOCHA_EXE="$src/$build/tocha" TOCHA_SOURCE_DIR="$src"
export TOCHA_DEVICE=cuda
specs=$(grep -l -E '#gpu|ref\.devices\(\)' spec/*_spec.lua)
failed=0
for tool in $tools; do
  # --check-api-memory-access and leak checking belong to memcheck alone.
  extra=""
  [ "$tool" = memcheck ] && extra="--leak-check full"
  compute-sanitizer --tool "$tool" $extra --error-exitcode 86 --print-limit 50 \
    --show-backtrace device "$build/tocha" "$(command -v busted)" --tags=gpu --output=TAP $specs >"$dir/$tool.log" 2>&1
  rc=$?
  echo "$tool: exit $rc; $(grep -E '^=+ (ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY)' "$dir/$tool.log" | sed 's/^=* //' | tr '\n' ' ')"
  echo "  busted: $(grep -c '^ok ' "$dir/$tool.log") ok, $(grep -c '^not ok ' "$dir/$tool.log") not ok"
  [ $rc -eq 0 ] || failed=1
done
exit $failed
