#!/bin/bash
# How long after a rank fails do the others report it? For each transport and signal,
# starts `railyard bench comm` (N ranks on this host, an allreduce loop with --timeout D),
# sends the signal to rank 1 once every rank is timing, and measures the time until every
# other rank has exited with its error (the issue's bound: D + 1 s), and until the
# launcher has exited (it kills a rank still stopped D + 3 s after the first failure).
#
#   bench/failure_latency.sh [--ranks 4] [--timeout 2s] [--reps 3] [--transports tcp,shm,ofi]
#
# By default all three transports; ofi, where it cannot run here, gets a row saying why.
#
# Everything runs on this host over loopback; every wait is bounded and every process
# started is killed on exit.
set -euo pipefail
RANKS=4 TIMEOUT=2s REPS=3 TRANSPORTS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --transports) TRANSPORTS=$2; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "failure_latency.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RY=${RAILYARD:-$ROOT/build/railyard}
[ -x "$RY" ] || { echo "failure_latency.sh: $RY not built (run make build)" >&2; exit 2; }
WORK=$(mktemp -d)
# ofi runs by default; where it cannot run here (no libfabric, no provider) it gets a row
# saying why instead of vanishing from the table, and asking for it explicitly fails.
SKIPPED=""
if [ -z "$TRANSPORTS" ]; then
  TRANSPORTS=tcp,shm,ofi
  if ! "$RY" bench comm --ranks 2 --transport ofi --sizes 4KiB --iters 1 >/dev/null \
      2>"$WORK/ofi_check"; then
    TRANSPORTS=tcp,shm
    SKIPPED="ofi: $(grep -m1 -v '^\s*$' "$WORK/ofi_check" || echo "bench comm --transport ofi failed")"
  fi
fi
LAUNCHER=""
cleanup() {
  if [ -n "$LAUNCHER" ]; then
    pkill -KILL -P "$LAUNCHER" 2>/dev/null || true
    kill -KILL "$LAUNCHER" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The pid of rank R among the launcher's children (from their environment).
rank_pid() {
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RAILYARD_RANK=$2"; then
      echo "$p"; return 0
    fi
  done
  return 1
}

echo "# seconds from the signal until every survivor exited with its error / the launcher exited;"
echo "# $RANKS ranks, allreduce 256 KiB, --timeout $TIMEOUT, $REPS runs each"
printf "%-6s %-8s %s\n" transport signal "survivors/launcher, seconds (runs)"
if [ -n "$SKIPPED" ]; then
  printf "%-6s %-8s %s\n" ofi - "not measured: ${SKIPPED#ofi: }"
  echo "failure_latency.sh: ofi not measured: ${SKIPPED#ofi: }" >&2
fi
for t in ${TRANSPORTS//,/ }; do
  for sig in KILL STOP; do
    results=""
    for rep in $(seq "$REPS"); do
      "$RY" bench comm --ranks "$RANKS" --transport "$t" --sizes 256KiB --iters 100000 \
        --timeout "$TIMEOUT" > "$WORK/out" 2> "$WORK/err" &
      LAUNCHER=$!
      for _ in $(seq 600); do  # at most 60 s for every rank to start timing
        grep -q "^# timing" "$WORK/out" 2>/dev/null && break
        sleep 0.1
      done
      grep -q "^# timing" "$WORK/out" || { echo "$t: ranks never started timing" >&2; exit 1; }
      victim=$(rank_pid "$LAUNCHER" 1)
      survivors=$(pgrep -P "$LAUNCHER" | grep -vx "$victim" | tr '\n' ' ')
      t0=$(date +%s.%N)
      kill -"$sig" "$victim"
      t1=""
      for _ in $(seq 6000); do  # bounded: about 60 s
        if [ -z "$t1" ]; then
          alive=0
          for p in $survivors; do  # exited: gone, or a zombie the launcher has not reaped
            state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo Z)
            [ "$state" = Z ] || alive=1
          done
          [ "$alive" = 0 ] && t1=$(date +%s.%N)
        fi
        kill -0 "$LAUNCHER" 2>/dev/null || break
        sleep 0.01
      done
      t2=$(date +%s.%N)
      kill -KILL "$victim" 2>/dev/null || true
      wait "$LAUNCHER" 2>/dev/null || true
      LAUNCHER=""
      if ! grep -q "rank 1 (" "$WORK/err"; then
        echo "$t $sig: rank 1 not named:" >&2
        cat "$WORK/err" >&2
      fi
      results="$results $(awk -v a="$t0" -v b="${t1:-$t2}" -v c="$t2" \
        'BEGIN { printf "%.2f/%.2f", b - a, c - a }')"
    done
    printf "%-6s %-8s %s\n" "$t" "SIG$sig" "$results"
  done
done
