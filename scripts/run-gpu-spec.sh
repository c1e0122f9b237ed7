#!/bin/sh
# Runs one spec's #gpu tests forced onto cuda. Exit 77 (CTest: not run) when no GPU is usable.
luajit="$1"; busted="$2"; spec="$3"
if ! TOCHA_DEVICE=cuda "$TOCHA_EXE" -e 'require "tocha".default_device()' >/dev/null 2>&1; then
  echo "no usable GPU: $("$TOCHA_EXE" -e 'io.write(require "tocha".versions().cuda_unavailable)' 2>&1)"
  exit 77
fi
TOCHA_DEVICE=cuda exec "$luajit" "$busted" --tags=gpu --output=utfTerminal "$spec"
