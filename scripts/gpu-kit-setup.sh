#!/bin/sh
# On the GPU test machine: unpacks the Debian packages carried in .gpukit/debs (made by
# shared/gpu/make-kit.sh) into /, keeping the machine's merged-/usr directory links (/lib ->
# usr/lib) intact, which a plain `dpkg -x` would replace with real directories.
set -e
for f in .gpukit/debs/*.deb; do
  dpkg-deb --fsys-tarfile "$f" | tar -C / --keep-directory-symlink -xf -
done
ldconfig
command -v lua >/dev/null || ln -s "$(command -v luajit)" /usr/local/bin/lua
command -v luajit >/dev/null && command -v busted >/dev/null
