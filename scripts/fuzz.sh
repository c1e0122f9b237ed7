#!/bin/sh
# Builds the libFuzzer targets with clang (ASan and UBSan too) in their own folder and runs
# each for a bounded time (FUZZ_SECONDS, default 30) from the committed corpus, on a copy so
# that the repository is not written. A crash fails the run and leaves its input in the
# build folder; each such input becomes a regression spec.
set -eu
build="${1:-build-fuzz}"
seconds="${FUZZ_SECONDS:-30}"
[ -f "$build/build.ninja" ] || CC=clang cmake -S . -B "$build" -G Ninja -DTOCHA_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_cache_entry fuzz_validation fuzz_onnx_file >/dev/null
passed=0; failed=0
for target in cache_entry validation onnx_file; do
  work="$build/corpus-$target"
  rm -rf "$work" && mkdir -p "$work" && cp fuzz/corpus/$target/* "$work"/ 2>/dev/null || true
  echo "== fuzzing $target for ${seconds}s"
  if ASAN_OPTIONS=max_allocation_size_mb=256:allocator_may_return_null=1:detect_leaks=1 \
     TOCHA_CACHE=off TOCHA_DEVICE=sim \
     "$build/fuzz_$target" -max_total_time="$seconds" -artifact_prefix="$build/crash-$target-" \
       -print_final_stats=1 "$work" > "$build/fuzz-$target.log" 2>&1; then
    passed=$((passed + 1))
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$build/fuzz-$target.log" | tr '\n' ' '; echo
  else
    failed=$((failed + 1))
    tail -n 40 "$build/fuzz-$target.log"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
