#!/bin/sh
# Installs the build into a fresh prefix and checks that require "tocha" works there, from
# the installed tocha executable and from plain luajit, and that a C program builds against
# the installed libtocha through pkg-config and through find_package(tocha) and runs, and that
# the README's `luarocks` line installs the module into a fresh LuaRocks tree that plain luajit
# requires it from (whatever the machine's default `lua` is). Prints "N passed, N failed".
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
# The rock: built by LuaRocks with CMake (in build.luarocks of the source tree), with the
# README's own luarocks line, read from README.md and typed in the source folder as the README
# says; the tree it installs into is named in a LuaRocks config file (LUAROCKS_CONFIG), so that
# the line runs as written. The line names Lua 5.1 (LuaJIT's): without it LuaRocks builds for
# the Lua that runs it, finds no headers for it and fails. Debian's luarocks runs under the
# first of lua5.1 ... lua5.4 installed: 5.2 where lua5.2 (which lua-busted depends on) is the
# only one, as on a fresh Debian 12, but 5.1 wherever lua5.1 is installed, which hides the
# failure; so the line runs a second time with luarocks under the machine's `lua` when that is
# not 5.1.
# Both trees must hold a rock for 5.1 that plain luajit, started in another folder, requires.
src="$(cd "$here/.." && pwd)"
line=$(grep -m 1 '^luarocks ' "$src/README.md" | sed 's/ *#.*//')
echo "the README's luarocks line: ${line:-none}"
luarocks_path=$(command -v luarocks)
rock() { # tree, interpreter to run luarocks under (empty: as installed): the README's line
  printf 'rocks_trees = { [[%s]] }\n' "$1" >"$1.config.lua"
  (cd "$src" && LUAROCKS_CONFIG="$1.config.lua" RUN_UNDER="$2" LUAROCKS_SCRIPT="$luarocks_path" sh -c '
    if [ -n "$RUN_UNDER" ]; then luarocks() { "$RUN_UNDER" "$LUAROCKS_SCRIPT" "$@"; }; fi
    eval "$1"' sh "$line") >"$1.log" 2>&1
}
check_rock() { # name, tree, interpreter (as rock)
  if [ -n "$line" ] && rock "$2" "$3"; then
    # shellcheck disable=SC2016 # $1 and $@ are the inner shell's
    check "$1, then plain luajit" "$version 1" sh -c 'cd "$1" && shift && "$@"' sh "$prefix" \
      env LUA_PATH="$2/share/lua/5.1/?.lua;$2/share/lua/5.1/?/init.lua;;" LUA_CPATH="$2/lib/lua/5.1/?.so;;" "$luajit" -e "$code"
    check "$1: a rock for Lua 5.1" "rocks-5.1" ls "$2/lib/luarocks"
  else
    tail -n 20 "$2.log" 2>/dev/null
    check "$1" "built" echo "failed"
  fi
}
check_rock "the README's luarocks line in the source folder" "$prefix/rocks" ""
# The machine's `lua`: 5.1 (or LuaJIT) or absent leaves nothing more to prove; any other version
# runs luarocks (a Lua script) for the line a second time.
lua_version=$(command -v lua >/dev/null && lua -v 2>&1 | head -n 1)
case "${lua_version:-none}" in
  none) echo "the machine has no lua: the line above ran under the Lua luarocks chose" ;;
  "Lua 5.1"* | LuaJIT*) echo "the machine's lua is ${lua_version%%  *}: the line above ran under it" ;;
  *) if head -n 1 "$luarocks_path" | grep -q lua; then
       check_rock "the README's line with luarocks run by the machine's lua (${lua_version%%  *})" "$prefix/rocks-lua" lua
     else
       echo "the machine's lua is ${lua_version%%  *}; luarocks ($luarocks_path) is not a Lua script to run under it"
     fi ;;
esac
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
