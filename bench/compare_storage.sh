#!/bin/bash
# Side-by-side storage benchmark: Railyard checkpoints against fio, in the same run, on the
# same directory, with the same number of writers and the same I/O mode.
#
#   bench/compare_storage.sh [--dir DIR] [--ranks R] [--size 1GiB] [--steps K] [--reps N] [--cold]
#                            [--settle S]
#
# For each mode (buffered with fsync at the end; O_DIRECT) it runs N repetitions of
#   fio: R jobs writing SIZE/R each sequentially (bs=4M), then reading it back;
#   railyard bench ckpt --ranks R --size SIZE --steps K (and --direct for O_DIRECT)
# and prints the medians and the ratios railyard/fio. Both sides start each write from the same
# state: the previous data removed, the page cache not dropped ("warm"; with --cold, dropped
# before each write). Reads always start from a dropped cache (as root), S seconds after the
# drop on both sides (--settle, default 5). The states differ in a VM: memory freed by a drop
# goes back to the host after a moment, and touching it again is slow, which then dominates
# buffered I/O. fio's read would otherwise start into the 1 GiB its own write had just left
# in the page cache, while railyard's writer has long given its pages back (write-behind):
# measured (5 runs each), fio's buffered read of 1 GiB runs at 0.80-1.41 GB/s right after the
# drop and 0.58-0.71 GB/s five seconds later. A side measured after a drop and the other
# without one, or one read straight after the drop and the other seconds later, would not be
# compared fairly. Needs: fio (scripts/bootstrap --bench) and a built railyard (make build). Everything it writes stays under DIR and is removed.
set -euo pipefail

DIR=/tmp/railyard-storage-bench
RANKS=2
SIZE=1GiB
STEPS=3
REPS=3
COLD=0
SETTLE=5
RAILYARD=${RAILYARD:-"$(dirname "$0")/../build/railyard"}

while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --cold) COLD=1; shift ;;
    --settle) SETTLE=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare_storage.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

command -v fio >/dev/null || { echo "compare_storage.sh: fio not found; run scripts/bootstrap --bench" >&2; exit 1; }
[ -x "$RAILYARD" ] || { echo "compare_storage.sh: $RAILYARD not built; run make build" >&2; exit 1; }

mkdir -p "$DIR"
trap 'rm -rf "$DIR"/fio "$DIR"/ckpt' EXIT

# Bytes from a size like 1GiB (binary) or 1GB (decimal).
bytes_of() {
  case "$1" in
    *iB) numfmt --from=iec-i "${1%B}" ;;
    *B) numfmt --from=si "${1%B}" ;;
    *) echo "$1" ;;
  esac
}
TOTAL=$(bytes_of "$SIZE")
PER_JOB=$((TOTAL / RANKS))

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

drop_caches() {
  sync
  if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

# fio's terse output (version 3): field 7 = read bandwidth KiB/s, field 48 = write KiB/s.
fio_run() {  # $1 = rw (write|read), $2 = direct (0|1) -> GB/s
  local rw=$1 direct=$2
  local extra=()
  [ "$rw" = write ] && extra=(--end_fsync=1)
  fio --name=seq --directory="$DIR/fio" --rw="$rw" --bs=4M --size="$PER_JOB" \
      --numjobs="$RANKS" --direct="$direct" --ioengine=psync --group_reporting \
      --minimal "${extra[@]}" 2>/dev/null |
    awk -F';' -v rw="$rw" '{kib = (rw == "read") ? $7 : $48; printf "%.3f\n", kib * 1024 / 1e9}'
}

printf "%-10s %-6s %12s %12s %8s\n" mode op fio_GB/s railyard_GB/s ratio
for mode in buffered direct; do
  direct=0; flag=()
  [ "$mode" = direct ] && { direct=1; flag=(--direct); }
  fw=(); fr=(); rw=(); rr=()
  for _ in $(seq "$REPS"); do
    rm -rf "$DIR/fio" "$DIR/ckpt"; mkdir -p "$DIR/fio"
    [ "$COLD" = 1 ] && drop_caches
    fw+=("$(fio_run write $direct)")
    drop_caches
    sleep "$SETTLE"  # measurement condition, see the header
    fr+=("$(fio_run read $direct)")
    rm -rf "$DIR/fio" "$DIR/ckpt"
    [ "$COLD" = 1 ] && drop_caches
    # (bench ckpt drops the cache itself before its read phase, then waits as long)
    out=$("$RAILYARD" bench ckpt --ranks "$RANKS" --size "$SIZE" --steps "$STEPS" \
          --dir "$DIR/ckpt" "${flag[@]}" --read-settle "${SETTLE}s" --json)
    rw+=("$(echo "$out" | sed -E 's/.*"write_gbps":([0-9.eE+-]+).*/\1/')")
    rr+=("$(echo "$out" | sed -E 's/.*"read_gbps":([0-9.eE+-]+).*/\1/')")
  done
  fwm=$(printf '%s\n' "${fw[@]}" | median); frm=$(printf '%s\n' "${fr[@]}" | median)
  rwm=$(printf '%s\n' "${rw[@]}" | median); rrm=$(printf '%s\n' "${rr[@]}" | median)
  printf "%-10s %-6s %12.3f %12.3f %8.2f\n" "$mode" write "$fwm" "$rwm" "$(echo "$rwm $fwm" | awk '{print $1/$2}')"
  printf "%-10s %-6s %12.3f %12.3f %8.2f\n" "$mode" read "$frm" "$rrm" "$(echo "$rrm $frm" | awk '{print $1/$2}')"
done
echo "ranks=$RANKS size=$SIZE steps=$STEPS reps=$REPS dir=$DIR cold=$COLD settle=${SETTLE}s (medians)"
