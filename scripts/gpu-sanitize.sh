#!/bin/sh
# On a machine with a GPU: runs the #gpu specs under compute-sanitizer's memcheck, racecheck
# and initcheck, one busted run per tool over every spec with GPU tests, forced onto cuda.
# Host backtraces are off (--show-backtrace device): to record one for each CUDA call the
# tool unwinds the host stack with libgcc, which aborts the process (SIGABRT, no message) when
# the call came from code that LuaJIT compiled, since those frames carry no unwind tables.
# Any sanitizer error fails the run (its exit code is non-zero); each tool's full report goes
# to DIR/<tool>.log.
#   sh scripts/gpu-sanitize.sh BUILD [DIR] [TOOLS...]
# TOCHA_SANITIZE_SPECS="spec/a_spec.lua ..." narrows the run to those specs (racecheck over
# every spec takes longer than one device command may run).
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
# Two specs make refused API calls on purpose, which memcheck reports as errors: memory_spec
# runs out of device memory (each refused cuMemAlloc), and comm_spec loads NCCL, whose runtime
# probes its kernels with cudaFuncGetAttributes and is refused for the architectures its build
# lacks. They run apart under memcheck with API errors unreported (their leaks and bad accesses
# still count); comm_spec stays in the other tools' run, which report no API errors.
all=${TOCHA_SANITIZE_SPECS:-$(grep -l -E '#gpu|ref\.devices\(\)' spec/*_spec.lua)}
apart=""; rest=""; others="" # others: all but memory_spec, for racecheck and initcheck
for s in $all; do
  case "$s" in */memory_spec.lua|*/comm_spec.lua) apart="$apart $s" ;; *) rest="$rest $s" ;; esac
  case "$s" in */memory_spec.lua) ;; *) others="$others $s" ;; esac
done
failed=0
sanitize() { # $1: log name, $2: tool, then the tool's extra options; specs from $specs
  name="$1"; log="$dir/$1.log"; tool="$2"; shift 2
  compute-sanitizer --tool "$tool" "$@" --error-exitcode 86 --print-limit 50 \
    --show-backtrace device "$build/tocha" "$(command -v busted)" --tags=gpu --output=TAP $specs >"$log" 2>&1
  rc=$?
  echo "$name: exit $rc; $(grep -E '^=+ (ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY)' "$log" | sed 's/^=* //' | tr '\n' ' ')"
  echo "  busted: $(grep -c '^ok ' "$log") ok, $(grep -c '^not ok ' "$log") not ok"
  [ $rc -eq 0 ] || failed=1
}
for tool in $tools; do
  # Leak checking belongs to memcheck alone.
  if [ "$tool" = memcheck ]; then specs=$rest; [ -n "$specs" ] && sanitize memcheck memcheck --leak-check full
  else specs=$others; [ -n "$specs" ] && sanitize "$tool" "$tool"; fi
done
case " $tools " in *" memcheck "*)
  specs=$apart
  [ -n "$specs" ] && sanitize memcheck-refused-calls memcheck --leak-check full --report-api-errors no ;;
esac
exit $failed
