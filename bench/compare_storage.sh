#!/bin/bash
# Side-by-side storage benchmark: Railyard checkpoints against fio, in the same run, on the
# same directory, with the same number of writers and the same I/O mode.
#
#   bench/compare_storage.sh [--dir DIR] [--ranks R] [--size 1GiB] [--steps K] [--reps N] [--cold]
#                            [--settle S] [--modes "buffered direct"]
#
# For each mode (buffered with fsync at the end; O_DIRECT) it runs N repetitions of
#   fio psync: R jobs writing SIZE/R each sequentially (bs=4M), then reading it back;
#   fio on Railyard's terms: the same requests Railyard makes. O_DIRECT: R jobs, ioengine
#     libaio, iodepth = the writer's io_threads (4), bs = its extent (8M), one file per job as
#     Railyard has one shard per rank. Buffered: R x 4 psync jobs of bs=8M, as Railyard's
#     writer has 4 threads per rank, each writing one contiguous region of its shard;
#   railyard bench ckpt --ranks R --size SIZE --steps K (and --direct for O_DIRECT)
# and prints the medians, and the median over the repetitions of railyard / the better fio
# of the same repetition (a ratio per pair: neighbours in time share the machine's state).
# The three runs of a repetition are interleaved, and their order alternates between
# repetitions. Both sides start each write from the same
# state: the previous data removed, the page cache not dropped ("warm"; with --cold, dropped
# before each write). Reads always start from a dropped cache (as root), S seconds after the
# drop on both sides (--settle, default 5). The states differ in a VM: memory freed by a drop
# goes back to the host after a moment, and touching it again is slow, which then dominates
# buffered I/O. fio's read would otherwise start into the page cache its own write had just
# filled, while railyard's writer has long given its pages back (write-behind). A side
# measured after a drop and the other without one, or one read straight after the drop and
# the other seconds later, would not be compared fairly.
# As root it drops the page cache of the whole machine (sync; echo 3 > drop_caches) before
# every read and, with --cold, every write: it says so before it starts.
# Needs: fio (scripts/bootstrap --bench) and a built railyard (make build). Everything it
# writes stays under DIR and is removed.
set -euo pipefail

DIR=/tmp/railyard-storage-bench
RANKS=2
SIZE=1GiB
STEPS=3
REPS=3
COLD=0
SETTLE=5
MODES="buffered direct"
# Railyard's writer and reader defaults (storage::WriterOptions, ReaderOptions): requests
# in flight per rank and the largest request.
RY_DEPTH=4
RY_BS=8M
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
    --modes) MODES=$2; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "compare_storage.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

command -v fio >/dev/null || { echo "compare_storage.sh: fio not found; run scripts/bootstrap --bench" >&2; exit 1; }
[ -x "$RAILYARD" ] || { echo "compare_storage.sh: $RAILYARD not built; run make build" >&2; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
  echo "compare_storage.sh: running as root: drops the page cache of the whole machine before" \
       "each read$([ "$COLD" = 1 ] && echo ' and each write')" >&2
fi
ENGINE=libaio
# io_uring where fio and the kernel have it (same depth and size; less CPU per request).
if fio --enghelp=io_uring >/dev/null 2>&1 && [ -e /proc/sys/kernel/io_uring_disabled ] &&
   [ "$(cat /proc/sys/kernel/io_uring_disabled)" = 0 ]; then
  ENGINE=io_uring
fi

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
fio_run() {  # $1 = rw (write|read), $2 = direct (0|1), $3 = psync|equal -> GB/s
  local rw=$1 direct=$2 how=$3
  local extra=()
  [ "$rw" = write ] && extra=(--end_fsync=1)
  if [ "$how" = psync ]; then
    extra+=(--ioengine=psync --bs=4M --numjobs="$RANKS" --size="$PER_JOB")
  elif [ "$direct" = 1 ]; then
    extra+=(--ioengine="$ENGINE" --iodepth="$RY_DEPTH" --bs="$RY_BS" --numjobs="$RANKS"
            --size="$PER_JOB")
  else
    extra+=(--ioengine=psync --bs="$RY_BS" --numjobs=$((RANKS * RY_DEPTH))
            --size=$((PER_JOB / RY_DEPTH)))
  fi
  fio --name="seq-$how" --directory="$DIR/fio" --rw="$rw" --direct="$direct" \
      --group_reporting --minimal "${extra[@]}" 2>/dev/null |
    awk -F';' -v rw="$rw" '{kib = (rw == "read") ? $7 : $48; printf "%.3f\n", kib * 1024 / 1e9}'
}

# One fio configuration: write, then read after a drop and the settle time. Sets W and R.
fio_pair() {  # $1 = direct, $2 = psync|equal
  rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"
  [ "$COLD" = 1 ] && drop_caches
  W=$(fio_run write "$1" "$2")
  drop_caches
  sleep "$SETTLE"  # measurement condition, see the header
  R=$(fio_run read "$1" "$2")
  rm -rf "$DIR/fio"
}

railyard_pair() {  # $@ = extra flags; sets W and R
  rm -rf "$DIR/ckpt"
  [ "$COLD" = 1 ] && drop_caches
  # (bench ckpt drops the cache itself before its read phase, then waits as long)
  local out
  out=$("$RAILYARD" bench ckpt --ranks "$RANKS" --size "$SIZE" --steps "$STEPS" \
        --dir "$DIR/ckpt" "$@" --read-settle "${SETTLE}s" --json 2>/dev/null)
  W=$(echo "$out" | sed -E 's/.*"write_gbps":([0-9.eE+-]+).*/\1/' | awk '{printf "%.3f", $1}')
  R=$(echo "$out" | sed -E 's/.*"read_gbps":([0-9.eE+-]+).*/\1/' | awk '{printf "%.3f", $1}')
}

max2() { echo "$1 $2" | awk '{print ($1 > $2) ? $1 : $2}'; }
ratio() { echo "$1 $2" | awk '{printf "%.3f\n", $1 / $2}'; }

printf "%-10s %-6s %11s %11s %13s %14s\n" mode op fio_psync fio_equal railyard_GB/s \
  ratio_vs_best
for mode in $MODES; do
  direct=0; flag=()
  [ "$mode" = direct ] && { direct=1; flag=(--direct); }
  pw=(); pr=(); ew=(); er=(); rw=(); rr=(); qw=(); qr=()
  for rep in $(seq "$REPS"); do
    # Alternate the order so that neither side always runs first.
    order="psync equal railyard"
    [ $((rep % 2)) = 0 ] && order="railyard equal psync"
    for who in $order; do
      case "$who" in
        psync) fio_pair "$direct" psync; pw+=("$W"); pr+=("$R"); PW=$W; PR=$R ;;
        equal) fio_pair "$direct" equal; ew+=("$W"); er+=("$R"); EW=$W; ER=$R ;;
        railyard) railyard_pair "${flag[@]}"; rw+=("$W"); rr+=("$R"); YW=$W; YR=$R ;;
      esac
    done
    qw+=("$(ratio "$YW" "$(max2 "$PW" "$EW")")")
    qr+=("$(ratio "$YR" "$(max2 "$PR" "$ER")")")
    echo "  rep $rep $mode: write psync $PW equal $EW railyard $YW (${qw[-1]}x);" \
         "read psync $PR equal $ER railyard $YR (${qr[-1]}x)" >&2
  done
  m() { printf '%s\n' "$@" | median; }
  printf "%-10s %-6s %11.3f %11.3f %13.3f %14.2f\n" "$mode" write "$(m "${pw[@]}")" \
    "$(m "${ew[@]}")" "$(m "${rw[@]}")" "$(m "${qw[@]}")"
  printf "%-10s %-6s %11.3f %11.3f %13.3f %14.2f\n" "$mode" read "$(m "${pr[@]}")" \
    "$(m "${er[@]}")" "$(m "${rr[@]}")" "$(m "${qr[@]}")"
done
echo "ranks=$RANKS size=$SIZE steps=$STEPS reps=$REPS dir=$DIR cold=$COLD settle=${SETTLE}s" \
     "equal-terms engine=$ENGINE iodepth=$RY_DEPTH bs=$RY_BS (medians; ratio: median of" \
     "railyard / the better fio of the same repetition)"
