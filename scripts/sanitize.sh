#!/bin/sh
# Builds libtocha and tocha with AddressSanitizer and UndefinedBehaviorSanitizer in its own
# folder and runs every CPU spec there. Any sanitizer report fails the run.
set -eu
build="${1:-build-asan}"
cache="${2:-$(pwd)/build/kernel-cache}"
[ -f "$build/build.ninja" ] || cmake -S . -B "$build" -G Ninja -DTOCHA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
  "-DTOCHA_TEST_CACHE_DIR=$cache" >/dev/null
cmake --build "$build" >/dev/null
echo "== specs under AddressSanitizer and UndefinedBehaviorSanitizer ($build)"
sh scripts/run-tests.sh "$build"
