#!/bin/bash
# Side-by-side storage benchmark: Railyard checkpoints against fio, in the same run, on the
# same directory, with the same number of writers and the same I/O mode.
#
#   bench/compare_storage.sh [--dir DIR] [--ranks R] [--size 1GiB] [--steps K] [--reps N] [--cold]
#                            [--settle S] [--modes "buffered direct"] [--no-equal-work]
#                            [--xxh3 "default library"]
#
# For each mode (buffered with fsync at the end; O_DIRECT) it runs N repetitions of
#   fio psync: R jobs writing SIZE/R each sequentially (bs=4M), then reading it back;
#   fio on Railyard's terms: the same requests Railyard makes. O_DIRECT: R jobs, ioengine
#     libaio, iodepth = the writer's io_threads (4), bs = its extent (8M), one file per job as
#     Railyard has one shard per rank. Buffered: R x 4 psync jobs of bs=8M, as Railyard's
#     writer has 4 threads per rank, each writing one contiguous region of its shard;
#   fio equal work (unless --no-equal-work): fio on Railyard's terms that also hashes every
#     block, as Railyard checksums every byte: --verify=xxhash --do_verify=0 on the write (a
#     hash per block, stored in the block), --verify=xxhash on the read (each block checked).
#     fio's hash is XXH32 and it fills every block with fresh data to hash, so this row costs
#     fio more CPU than Railyard's checksums cost Railyard: it is shown, labelled, and is
#     not part of the ratio;
#   railyard bench ckpt --ranks R --size SIZE --steps K (and --direct for O_DIRECT), once per
#     name in --xxh3: "default" (the checksum implementation Railyard picks), or a value of
#     `bench ckpt --xxh3` ("library", "baseline", "avx2") to compare implementations;
# and prints the medians, and the median over the repetitions of railyard / the better raw fio
# (psync or Railyard's terms) of the same repetition (a ratio per pair: neighbours in time
# share the machine's state), with its range. The runs of a repetition are interleaved, and
# their order reverses between repetitions. Both sides start each write from the same
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
EQUAL_WORK=1
XXH3="default"
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
    --no-equal-work) EQUAL_WORK=0; shift ;;
    --xxh3) XXH3=$2; shift 2 ;;
    -h|--help) sed -n '2,43p' "$0"; exit 0 ;;
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
fio_run() {  # $1 = rw (write|read), $2 = direct (0|1), $3 = psync|equal|work -> GB/s
  local rw=$1 direct=$2 how=$3
  local extra=()
  [ "$rw" = write ] && extra=(--end_fsync=1)
  if [ "$how" = work ]; then
    if [ "$rw" = write ]; then extra+=(--verify=xxhash --do_verify=0); else extra+=(--verify=xxhash); fi
    extra+=(--verify_state_save=0)  # else fio leaves <job>-verify.state files in the cwd
  fi
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
fio_pair() {  # $1 = direct, $2 = psync|equal|work
  rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"
  [ "$COLD" = 1 ] && drop_caches
  W=$(fio_run write "$1" "$2")
  drop_caches
  sleep "$SETTLE"  # measurement condition, see the header
  R=$(fio_run read "$1" "$2")
  rm -rf "$DIR/fio"
}

railyard_pair() {  # $1 = --xxh3 name, $@ = extra flags; sets W and R
  local impl=$1; shift
  local xxh3=()
  [ "$impl" != default ] && xxh3=(--xxh3 "$impl")
  rm -rf "$DIR/ckpt"
  [ "$COLD" = 1 ] && drop_caches
  # (bench ckpt drops the cache itself before its read phase, then waits as long)
  local out
  out=$("$RAILYARD" bench ckpt "${xxh3[@]}" --ranks "$RANKS" --size "$SIZE" --steps "$STEPS" \
        --dir "$DIR/ckpt" "$@" --read-settle "${SETTLE}s" --json 2>/dev/null)
  W=$(echo "$out" | sed -E 's/.*"write_gbps":([0-9.eE+-]+).*/\1/' | awk '{printf "%.3f", $1}')
  R=$(echo "$out" | sed -E 's/.*"read_gbps":([0-9.eE+-]+).*/\1/' | awk '{printf "%.3f", $1}')
}

max2() { echo "$1 $2" | awk '{print ($1 > $2) ? $1 : $2}'; }
ratio() { echo "$1 $2" | awk '{printf "%.3f\n", $1 / $2}'; }
m() { printf '%s\n' "$@" | median; }
range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "[%.2f, %.2f]", lo, hi}'; }

FIO_RUNS="psync equal"
[ "$EQUAL_WORK" = 1 ] && FIO_RUNS="$FIO_RUNS work"
RUNS="$FIO_RUNS"
for impl in $XXH3; do RUNS="$RUNS railyard:$impl"; done
reverse() { echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; }

printf "%-9s %-5s" mode op
for run in $RUNS; do
  case "$run" in
    psync) printf " %10s" fio_psync ;;
    equal) printf " %10s" fio_equal ;;
    work) printf " %15s" fio_equal_work ;;
    railyard:*) printf " %16s %20s" "$run" "ratio [range]" ;;
  esac
done
printf "\n"
for mode in $MODES; do
  direct=0; flag=()
  [ "$mode" = direct ] && { direct=1; flag=(--direct); }
  declare -A WS=() RS=() QW=() QR=()  # per run: space-separated values over the repetitions
  for rep in $(seq "$REPS"); do
    # Reverse the order every other repetition so that no run always goes first.
    order=$RUNS
    [ $((rep % 2)) = 0 ] && order=$(reverse "$RUNS")
    declare -A W1=() R1=()
    for run in $order; do
      case "$run" in
        railyard:*) railyard_pair "${run#railyard:}" "${flag[@]}" ;;
        *) fio_pair "$direct" "$run" ;;
      esac
      W1[$run]=$W; R1[$run]=$R
      WS[$run]+="$W "; RS[$run]+="$R "
    done
    best_w=$(max2 "${W1[psync]}" "${W1[equal]}")
    best_r=$(max2 "${R1[psync]}" "${R1[equal]}")
    line="  rep $rep $mode:"
    for run in $RUNS; do line+=" $run ${W1[$run]}/${R1[$run]}"; done
    for impl in $XXH3; do
      QW[$impl]+="$(ratio "${W1[railyard:$impl]}" "$best_w") "
      QR[$impl]+="$(ratio "${R1[railyard:$impl]}" "$best_r") "
    done
    echo "$line (write/read GB/s)" >&2
  done
  for op in write read; do
    printf "%-9s %-5s" "$mode" "$op"
    for run in $RUNS; do
      if [ "$op" = write ]; then vals=${WS[$run]}; else vals=${RS[$run]}; fi
      # shellcheck disable=SC2086
      med=$(m $vals)
      case "$run" in
        work) printf " %15.3f" "$med" ;;
        railyard:*)
          impl=${run#railyard:}
          if [ "$op" = write ]; then q=${QW[$impl]}; else q=${QR[$impl]}; fi
          # shellcheck disable=SC2086
          printf " %16.3f %20s" "$med" "$(printf '%.2f ' "$(m $q)")$(range $q)" ;;
        *) printf " %10.3f" "$med" ;;
      esac
    done
    printf "\n"
  done
  unset WS RS QW QR
done
echo "ranks=$RANKS size=$SIZE steps=$STEPS reps=$REPS dir=$DIR cold=$COLD settle=${SETTLE}s" \
     "equal-terms engine=$ENGINE iodepth=$RY_DEPTH bs=$RY_BS; GB/s medians; ratio: median and" \
     "range of railyard / the better of fio_psync and fio_equal in the same repetition" \
     "(fio_equal_work, fio hashing every block, is not in the ratio); load average" \
     "$(cut -d' ' -f1-3 /proc/loadavg)"
