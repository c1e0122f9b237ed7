#!/bin/sh
# Installs the build into a fresh prefix and checks that require "tocha" works there, from
# the installed tocha executable and from plain luajit. Prints "N passed, N failed".
set -u
build="$1"; luajit="$2"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
passed=0; failed=0
check() { # name, expected output, command...
  name="$1"; want="$2"; shift 2
  got=$("$@" 2>&1)
  if [ "$got" = "$want" ]; then passed=$((passed + 1)); echo "ok: $name"
  else failed=$((failed + 1)); echo "FAILED: $name: got '$got', expected '$want'"; fi
}
cmake --install "$build" --prefix "$prefix" >/dev/null || { echo "cmake --install failed"; exit 1; }
code='local t = require "tocha" io.write(t.version, " ", t.ones({2}, {device = "sim"}):to_table()[2])'
version=$(sed -n 's/^project(tocha VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../CMakeLists.txt")
check "installed tocha" "$version 1" env -u LUA_PATH "$prefix/bin/tocha" -e "$code"
check "plain luajit" "$version 1" env LUA_PATH="$prefix/share/lua/5.1/?.lua;$prefix/share/lua/5.1/?/init.lua;;" "$luajit" -e "$code"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
