#!/bin/sh
# Installs the Debian packages tocha builds and tests with, when missing. As root it runs
# apt-get; otherwise it prints the command to run. The CUDA toolkit (headers and NVRTC) is
# not a Debian package: it is expected in /usr/local/cuda or $CUDA_HOME.
set -eu
packages="build-essential cmake ninja-build pkg-config luajit libluajit-5.1-dev lua-busted lua-dkjson luarocks libedit-dev libxxhash-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx python3-torch python3-torchvision libstb-dev clang libclang-rt-14-dev python3 gnuplot-nox"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "tocha needs these Debian packages:$missing" >&2
    echo "run: sudo apt-get install -y$missing" >&2
    exit 1
  fi
fi
cuda="${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}"
if [ ! -f "$cuda/include/cuda.h" ] || [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "tocha needs the CUDA toolkit (cuda.h, nvrtc.h, NVRTC): none found in $cuda; set CUDA_HOME" >&2
  exit 1
fi
