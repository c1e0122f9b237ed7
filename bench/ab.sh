#!/bin/sh
# bench/ab.sh: times kernel variants against the tree's own kernels, on this machine, in one
# command, so that the comparison shares the machine, its clocks and its copy bandwidth.
#
#   sh bench/ab.sh BUILD PATTERN KERNEL=VARIANT [KERNEL=VARIANT ...]
#
# KERNEL is a file in kernels/ (upsample_nearest2d_forward.cu), VARIANT a changed copy of it
# or a patch against it (a name ending in .patch, applied with `patch`).
# Each variant in turn replaces the kernel, the build folder is rebuilt (the kernels are
# embedded), and bench/upsample.lua times the cases whose label matches PATTERN (a Lua
# pattern, as --only). The tree's kernels are put back at the end, also on failure. Prints one
# row per case: the label, then % of copy for the tree and for each variant.
set -eu
build="${1:?usage: ab.sh BUILD PATTERN KERNEL=VARIANT...}"; pattern="${2:?pattern}"; shift 2
work="$(mktemp -d)"
restore() {
  for f in "$work"/orig.*; do [ -e "$f" ] && cp "$f" "kernels/${f#"$work"/orig.}"; done
  touch kernels/*.cu kernels/*.cuh   # copies keep old times: make the rebuild see them
  cmake --build "$build" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap restore EXIT INT TERM
run() { # $1: column name
  touch kernels/*.cu kernels/*.cuh
  cmake --build "$build" >/dev/null
  "$build/tocha" bench/upsample.lua --out "$work/out" --only "$pattern" |
    awk -v col="$1" '/% of copy$/ { print $1 " " $2 " " $3 " " $4 "\t" col "\t" $(NF-2) }' >> "$work/rows"
}
run tree
i=0
for spec in "$@"; do
  i=$((i + 1))
  kernel="${spec%%=*}"; variant="${spec#*=}"
  [ -f "kernels/$kernel" ] || { echo "ab.sh: no kernels/$kernel" >&2; exit 2; }
  [ -e "$work/orig.$kernel" ] || cp "kernels/$kernel" "$work/orig.$kernel"
  case "$variant" in
    *.patch) cp "$work/orig.$kernel" "kernels/$kernel"; patch -s "kernels/$kernel" < "$variant" ;;
    *) cp "$variant" "kernels/$kernel" ;;
  esac
  run "v$i:$(basename "$variant")"
  cp "$work/orig.$kernel" "kernels/$kernel"
done
# One row per case, the columns in the order run.
awk -F'\t' '
  { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if (!($2 in cseen)) { cseen[$2] = 1; cols[++m] = $2 }
    v[$1, $2] = $3 }
  END {
    printf "%-28s", "case"; for (j = 1; j <= m; j++) printf "  %s", cols[j]; printf "\n"
    for (k = 1; k <= n; k++) {
      printf "%-28s", order[k]
      for (j = 1; j <= m; j++) printf "  %s", v[order[k], cols[j]]
      printf "\n"
    }
  }' "$work/rows"
