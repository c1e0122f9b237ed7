#!/bin/sh
# bench/ab.sh: times kernel variants against the tree's own kernels, on this machine, in one
# command, so that the comparison shares the machine, its clocks and its copy bandwidth.
#
#   [AB_LAUNCHES=N] sh bench/ab.sh BUILD PATTERN FILE=VARIANT[+FILE=VARIANT...] ...
#
# Each argument after PATTERN is one variant, one column of the result: FILE is a file of the
# tree (a bare name means kernels/NAME, as upsample_nearest2d_forward.cu), VARIANT a changed
# copy of it or a patch against it (a name ending in .patch, applied with `patch`); a variant
# that needs several files joins them with "+" (a kernel and the host code that launches it;
# two patches of one file apply one after the other).
# Each variant in turn replaces its files, the build folder is rebuilt (the kernels are
# embedded), and bench/upsample.lua times the cases whose label matches PATTERN (a Lua
# pattern, as --only). The tree's files are put back after each variant and at the end, also
# on failure. AB_LAUNCHES sets the launches timed per case (bench/upsample.lua's default
# otherwise). Prints one row per case: the label, then % of copy for the tree and for each
# variant.
set -eu
build="${1:?usage: ab.sh BUILD PATTERN FILE=VARIANT[+FILE=VARIANT...]...}"; pattern="${2:?pattern}"; shift 2
work="$(mktemp -d)"
# A file's saved original: its path with / as %.
saved() { echo "$work/orig.$(echo "$1" | tr / %)"; }
put_back() {
  for f in "$work"/orig.*; do
    [ -e "$f" ] || continue
    cp "$f" "$(echo "${f#"$work"/orig.}" | tr % /)"
  done
}
restore() {
  put_back
  touch kernels/*.cu kernels/*.cuh kernels/*.h   # copies keep old times: make the rebuild see them
  cmake --build "$build" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap restore EXIT INT TERM
run() { # $1: column name
  touch kernels/*.cu kernels/*.cuh kernels/*.h host/src/*.c
  cmake --build "$build" >/dev/null
  # A case's line: its label, "block N", the time, GB/s and "P% of copy".
  "$build/tocha" bench/upsample.lua --out "$work/out" --only "$pattern" ${AB_LAUNCHES:+--launches "$AB_LAUNCHES"} |
    awk -v col="$1" '/% of copy$/ { pct = $(NF-2); lab = $0; sub(/ +block .*$/, "", lab); print lab "\t" col "\t" pct }' >> "$work/rows"
}
run tree
i=0
for column in "$@"; do
  i=$((i + 1))
  names=""
  for spec in $(echo "$column" | tr + ' '); do
    file="${spec%%=*}"; variant="${spec#*=}"
    case "$file" in */*) ;; *) file="kernels/$file" ;; esac
    [ -f "$file" ] || { echo "ab.sh: no $file" >&2; exit 2; }
    [ -e "$(saved "$file")" ] || cp "$file" "$(saved "$file")"
    case "$variant" in
      *.patch) patch -s --no-backup-if-mismatch "$file" < "$variant" ;; # patches stack
      *) cp "$variant" "$file" ;;
    esac
    names="$names${names:++}$(basename "$variant")"
  done
  run "v$i:$names"
  put_back
done
# One row per case, the columns in the order run; then, per variant against the tree, the
# cases more than half a point better and worse (the noise of one machine is about 0.3) and
# the cases at 90% of copy.
awk -F'\t' '
  { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    if (!($2 in cseen)) { cseen[$2] = 1; cols[++m] = $2 }
    v[$1, $2] = $3 }
  END {
    printf "%-44s", "case"; for (j = 1; j <= m; j++) printf "  %s", cols[j]; printf "\n"
    for (k = 1; k <= n; k++) {
      printf "%-44s", order[k]
      for (j = 1; j <= m; j++) printf "  %s", v[order[k], cols[j]]
      printf "\n"
    }
    for (j = 1; j <= m; j++) {
      better = worse = at90 = 0
      for (k = 1; k <= n; k++) {
        d = v[order[k], cols[j]] - v[order[k], cols[1]]   # "92.2%" reads as 92.2
        better += d > 0.5; worse += d < -0.5; at90 += v[order[k], cols[j]] + 0 >= 90
      }
      if (j == 1) printf "%s: %d of %d cases at 90%%\n", cols[j], at90, n
      else printf "%s: %d better, %d worse by more than 0.5 points; %d of %d cases at 90%%\n", cols[j], better, worse, at90, n
    }
  }' "$work/rows"
