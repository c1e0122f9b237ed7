#!/bin/sh
# Installs the build into a fresh prefix and checks that require "tocha" works there, from
# the installed tocha executable and from plain luajit, and that a C program builds against
# the installed libtocha through pkg-config and through find_package(tocha) and runs, and that
# `luarocks make` installs the module into a fresh LuaRocks tree that plain luajit requires it
# from (whatever the machine's default `lua` is). Prints "N passed, N failed".
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
here="$(cd "$(dirname "$0")" && pwd)"
cc=${CC:-cc}
libdir=$(ls -d "$prefix"/lib*/pkgconfig 2>/dev/null | head -n 1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs tocha)
# shellcheck disable=SC2086 # the flags are words
"$cc" -o "$prefix/consumer-pc" "$here/install-check/consumer.c" $flags >"$prefix/cc.log" 2>&1 || cat "$prefix/cc.log"
check "C program through pkg-config" "$version 2.5" env LD_LIBRARY_PATH="$(dirname "$libdir")" "$prefix/consumer-pc"
cmake -S "$here/install-check" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" >"$prefix/cmake.log" 2>&1 &&
  cmake --build "$prefix/consumer-build" >>"$prefix/cmake.log" 2>&1 || cat "$prefix/cmake.log"
check "C program through find_package(tocha)" "$version 2.5" env LD_LIBRARY_PATH="$(dirname "$libdir")" "$prefix/consumer-build/consumer"
# The rock: built by LuaRocks with CMake (in build.luarocks of the source tree), into a tree,
# with the README's command. It names Lua 5.1 (LuaJIT's): without it LuaRocks builds for the
# machine's default `lua`, which is 5.2 on a fresh Debian 12 (luarocks pulls lua5.2 in), finds
# no headers for it and fails. The line below says which `lua` this machine has, so that a run
# on a machine whose `lua` is not 5.1 shows it was proved there.
echo "the machine's lua: $(command -v lua >/dev/null && lua -v 2>&1 | head -n 1 || echo none)"
src="$(cd "$here/.." && pwd)"
if (cd "$src" && luarocks --lua-version=5.1 make --tree "$prefix/rocks") >"$prefix/rock.log" 2>&1; then
  check "luarocks make, then plain luajit" "$version 1" env LUA_PATH="$prefix/rocks/share/lua/5.1/?.lua;$prefix/rocks/share/lua/5.1/?/init.lua;;" \
    LUA_CPATH="$prefix/rocks/lib/lua/5.1/?.so;;" "$luajit" -e "$code"
else
  tail -n 20 "$prefix/rock.log"
  check "luarocks make" "built" echo "failed"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
