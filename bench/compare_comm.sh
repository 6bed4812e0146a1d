#!/bin/bash
# Side-by-side allreduce benchmark: Railyard against OpenMPI and Gloo, in the same run, on
# this host, over loopback only, with the same ranks, sizes, iteration counts, checks and TCP
# congestion control.
#
#   bench/compare_comm.sh [--ranks 2[,4...]] [--sizes 4KiB:64MiB | 4KiB,1MiB,...]
#                         [--iters 20] [--warmup 5] [--reps 3] [--json FILE] [--ofi]
#                         [--timeout-s 300] [--cc NAME|system] [--no-cc-feature]
#
# Equal terms (the main table). Every TCP socket of every system uses one congestion control,
# --cc: by default the one Railyard itself picks for connections inside one kernel (cubic, or
# reno where cubic is missing), or `system` for the host's default (net.ipv4.tcp_congestion_
# control, often BBR). Railyard gets it through RAILYARD_TCP_CC=NAME|system; OpenMPI, Gloo,
# ry_ofi (libfabric opens its own sockets) and iperf3 through an LD_PRELOAD shim
# (bench/compare/tcp_cc_preload.c, checked: a run whose log shows no socket set, or one
# refused, fails) or their own option (iperf3 -C, tcp_ring_ceiling --cc).
# The feature row, "railyard (per-socket cc, a feature the peers lack)" (skip with
# --no-cc-feature): railyard as it runs by default (RAILYARD_TCP_CC=auto: cubic on same-host
# connections only) against OpenMPI and Gloo as they run by default (the system's algorithm
# on every socket). On a host whose default is a pacing algorithm such as BBR most of that
# ratio is the congestion control, not the implementation; it is printed apart for that reason.
#
# Systems, each measured like `railyard bench comm --json` (f32 sum, out-of-place, per size one
# checked iteration, warm-up, barrier, timed iterations each checked at sampled positions and
# the last in full (docs/comm.md, "Checking"); time = slowest rank's mean; busbw =
# size/time x 2(n-1)/n) by bench/compare/{mpi,gloo}_allreduce.cc, built here into a temp dir:
#   ry_tcp, ry_shm (ry_ofi with --ofi)   railyard bench comm --transport ... --json; its
#                                        top-level keys are the out-of-place variant, the one
#                                        read here (its in-place one, "in_place", is not; a
#                                        wrong value there fails railyard's run, so this one)
#   mpi_tcp_default, mpi_tcp_ring        OpenMPI, pml ob1, btl tcp,self on lo; default
#                                        algorithm, and ring forced (coll_tuned algorithm 4)
#   mpi_sm                               OpenMPI, pml ob1, btl vader,self
#   gloo                                 gloo::allreduce, RING, tcp device on 127.0.0.1
#   tcp_ceil                             bench/compare/tcp_ring_ceiling.cc: n processes in a
#                                        ring over loopback TCP, each sending 1 GiB to the next
#                                        while receiving from the previous, no reduction; GB/s
#                                        per rank, the better of two ways (4 connections per
#                                        neighbour with a blocking thread each, or 1 connection
#                                        driven by one thread with poll), under --cc. A
#                                        bandwidth-optimal allreduce's busbw is the bytes each
#                                        rank sends over the time, so this bounds an allreduce
#                                        over loopback TCP here from above (same for every size;
#                                        one that fits in cache can beat the streaming figure).
#   ry_tcp_auto, *_sys                   the feature row: railyard with RAILYARD_TCP_CC=auto;
#                                        the OpenMPI tcp and Gloo peers without the shim (run
#                                        only when --cc differs from the system's default).
# Wrong values: a row whose `wrong` is not 0 (any system) is left out of every median, named
# on stderr, and the script exits 1 after printing the tables; so does a run that failed.
# pml ob1 is forced because OpenMPI would otherwise pick UCX and ignore the btl choice. No
# process is bound to a core (mpirun --bind-to none), like railyard's and Gloo's ranks, and
# OpenMPI yields while it polls (mpi_yield_when_idle 1, its own choice when oversubscribed):
# on this shared 2-core machine a rank that spins without yielding loses whole timeslices
# whenever another process runs (measured: 4 KiB allreduce 8 ms instead of 0.09 ms). The
# systems alternate inside each repetition so that noise from other load spreads over all of
# them; the table shows the median over --reps per size and system. Also printed: the loopback
# ceiling (iperf3 --bidir on 127.0.0.1 under --cc when iperf3 is installed; memcpy of 64 MiB
# buffers). Every process runs under `timeout` in its own process group and is killed on exit.
# Needs: mpicxx/mpirun (openmpi-bin, libopenmpi-dev), libgloo-dev, jq, g++, gcc, a built
# railyard (scripts/bootstrap --bench installs the rest).
set -euo pipefail

RANKS=2
SIZES=4KiB:64MiB
ITERS=20
WARMUP=5
REPS=3
JSON_OUT=
OFI=0
TIMEOUT_S=300
CC=
CC_FEATURE=1
HERE=$(cd "$(dirname "$0")" && pwd)
RAILYARD=${RAILYARD:-"$HERE/../build/railyard"}

die() { echo "compare_comm.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --json) JSON_OUT=$2; shift 2 ;;
    --ofi) OFI=1; shift ;;
    --timeout-s) TIMEOUT_S=$2; shift 2 ;;
    --cc) CC=$2; shift 2 ;;
    --no-cc-feature) CC_FEATURE=0; shift ;;
    --peer-cc) die "--peer-cc is gone: the peers now run under --cc (default cubic) always" ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^set/!p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in "$ITERS" "$WARMUP" "$REPS" "$TIMEOUT_S" ${RANKS//,/ }; do
  [[ $v =~ ^[0-9]+$ ]] || die "expected a non-negative integer, got '$v'"
done
for tool in mpicxx mpirun jq g++ gcc numfmt timeout python3; do
  command -v "$tool" >/dev/null ||
    die "$tool not found (scripts/bootstrap --bench: openmpi-bin, libopenmpi-dev, jq, g++)"
done
[ -f /usr/include/gloo/allreduce.h ] || die "Gloo headers not found; install libgloo-dev"
[ -x "$RAILYARD" ] || die "$RAILYARD not built; run make build (or set RAILYARD=)"
# Whether a TCP socket of this process accepts congestion control $1.
cc_settable() {
  python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode())' \
    "$1" 2>/dev/null
}
SYSTEM_CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
if [ -z "$CC" ]; then  # Railyard's own pick for same-host connections (net/tcp/congestion.h)
  CC=reno
  cc_settable cubic && CC=cubic
fi
[ "$CC" = system ] || [[ $CC =~ ^[a-z0-9_]{1,15}$ ]] ||
  die "--cc '$CC': expected an algorithm name such as cubic, or system"
[ "$CC" = system ] || cc_settable "$CC" ||
  die "--cc $CC: this host cannot set it (available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
# The shim is needed where the equal-terms algorithm is not what a socket gets by itself.
SHIM=0
[ "$CC" != system ] && [ "$CC" != "$SYSTEM_CC" ] && SHIM=1
CC_SHOWN=$CC
[ "$CC" = system ] && CC_SHOWN="system ($SYSTEM_CC)"

WORK=$(mktemp -d /tmp/railyard-compare-comm.XXXXXX)
PIDS=()
# Kills the process group of every job still running (timeout makes each its own group), then
# removes the temp dir. Runs on every exit, including Ctrl-C and a failed command.
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL -- "-$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts "$@" in the background under timeout, stdout to $1 and stderr to $2.
spawn() {
  local out=$1 err=$2
  shift 2
  timeout -k 5 "$TIMEOUT_S" "$@" >"$out" 2>"$err" </dev/null &
  PIDS+=("$!")
}
# Waits for every spawned job; fails with the last non-zero status.
wait_all() {
  local p rc=0
  for p in "${PIDS[@]}"; do wait "$p" || rc=$?; done
  PIDS=()
  return "$rc"
}

bytes_of() {
  case "$1" in
    *iB) numfmt --from=iec-i "${1%B}" ;;
    *B) numfmt --from=si "${1%B}" ;;
    *) echo "$1" ;;
  esac
}
# The byte sizes, as railyard expands MIN:MAX (doubling), or the list as given.
SIZE_LIST=()
if [[ $SIZES == *:* ]]; then
  lo=$(bytes_of "${SIZES%%:*}") hi=$(bytes_of "${SIZES#*:}")
  if [ "$lo" -le 0 ] || [ "$hi" -lt "$lo" ]; then die "--sizes '$SIZES': need 0 < MIN <= MAX"; fi
  for ((b = lo; b <= hi; b *= 2)); do SIZE_LIST+=("$b"); done
else
  for s in ${SIZES//,/ }; do SIZE_LIST+=("$(bytes_of "$s")"); done
fi
CSV_SIZES=$(IFS=,; echo "${SIZE_LIST[*]}")

echo "# building the comparison programs in $WORK"
BIN=$WORK/bin
mkdir -p "$BIN" "$WORK/out"
timeout 300 mpicxx -std=c++20 -O3 -DOMPI_SKIP_MPICXX -o "$BIN/mpi_allreduce" \
  "$HERE/compare/mpi_allreduce.cc"
timeout 300 g++ -std=c++20 -O3 -o "$BIN/gloo_allreduce" "$HERE/compare/gloo_allreduce.cc" \
  -lgloo -pthread
timeout 300 g++ -std=c++20 -O2 -o "$BIN/tcp_ring_ceiling" "$HERE/compare/tcp_ring_ceiling.cc" \
  -pthread
if [ "$SHIM" = 1 ]; then
  timeout 300 gcc -O2 -shared -fPIC -o "$BIN/tcp_cc_preload.so" "$HERE/compare/tcp_cc_preload.c" -ldl
fi
cat >"$WORK/memcpy_bw.cc" <<'EOF'
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
int main() {  // GB/s copied (each byte is read once and written once) with 64 MiB buffers
  const size_t bytes = size_t{64} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  for (int i = 0; i < 3; ++i) std::memcpy(b.data(), a.data(), bytes);
  const int iters = 20;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) { a[i] = static_cast<char>(i); std::memcpy(b.data(), a.data(), bytes); }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.3f\n", b[iters - 1] == static_cast<char>(iters - 1) ? bytes * iters / s / 1e9 : 0.0);
}
EOF
timeout 300 g++ -std=c++17 -O2 -o "$BIN/memcpy_bw" "$WORK/memcpy_bw.cc"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1
        --mca mpi_yield_when_idle 1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
BENCH_ARGS=(--iters "$ITERS" --warmup "$WARMUP")
SYSTEMS=(ry_tcp ry_shm mpi_tcp_default mpi_tcp_ring mpi_sm gloo tcp_ceil)
[ "$OFI" = 1 ] && SYSTEMS=(ry_tcp ry_shm ry_ofi mpi_tcp_default mpi_tcp_ring mpi_sm gloo tcp_ceil)
# The feature row's peers run as they do by default; under the shim that is a second run.
if [ "$CC_FEATURE" = 1 ]; then
  SYSTEMS+=(ry_tcp_auto)
  [ "$SHIM" = 1 ] && SYSTEMS+=(mpi_tcp_default_sys mpi_tcp_ring_sys gloo_sys)
fi
FAILED=0

# Runs one system once for $2 ranks; appends its rows, tagged, to $WORK/rows.jsonl.
run_system() {
  local sys=$1 n=$2 rep=$3 r label=$1
  local out=$WORK/out/$sys.$n.$rep rc=0
  : >"$out"
  # Equal terms unless the label says otherwise: *_sys peers run without the shim, and
  # ry_tcp_auto with railyard's own per-socket choice.
  local shim=$SHIM ry_cc=$CC
  case "$sys" in
    *_sys) shim=0; sys=${sys%_sys} ;;
    ry_tcp_auto) ry_cc=auto; sys=ry_tcp ;;
    ry_shm|mpi_sm) shim=0 ;;
  esac
  local preload=()
  [ "$shim" = 1 ] && preload=(env LD_PRELOAD="$BIN/tcp_cc_preload.so" RY_PRELOAD_TCP_CC="$CC"
                             RY_PRELOAD_TCP_CC_LOG=1)
  case "$sys" in
    ry_tcp)  # railyard sets its own sockets: no shim
      spawn "$out" "$out.err" env RAILYARD_TCP_CC="$ry_cc" "$RAILYARD" bench comm --ranks "$n" \
        --transport tcp "${BENCH_ARGS[@]}" --json --sizes "$CSV_SIZES"
      shim=0 ;;
    ry_*)  # shm has no sockets; ofi's come from libfabric, hence the shim
      spawn "$out" "$out.err" "${preload[@]}" "$RAILYARD" bench comm --ranks "$n" \
        --transport "${sys#ry_}" "${BENCH_ARGS[@]}" --json --sizes "$CSV_SIZES" ;;
    mpi_*)
      local mca=(--mca btl "tcp,self")
      [ "$sys" = mpi_sm ] && mca=(--mca btl "vader,self")
      [ "$sys" = mpi_tcp_ring ] &&
        mca+=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
      [ "$shim" = 1 ] && mca+=(-x LD_PRELOAD="$BIN/tcp_cc_preload.so" -x RY_PRELOAD_TCP_CC="$CC"
                               -x RY_PRELOAD_TCP_CC_LOG=1)
      spawn "$out" "$out.err" "${MPIRUN[@]}" -np "$n" "${mca[@]}" "$BIN/mpi_allreduce" \
        --sizes "$CSV_SIZES" "${BENCH_ARGS[@]}" ;;
    gloo)
      local store=$WORK/store.$label.$n.$rep
      mkdir -p "$store"
      for ((r = 0; r < n; r++)); do
        local o=/dev/null
        [ "$r" = 0 ] && o=$out
        spawn "$o" "$out.err.$r" "${preload[@]}" env RANK="$r" WORLD_SIZE="$n" GLOO_STORE_DIR="$store" \
          GLOO_HOST=127.0.0.1 "$BIN/gloo_allreduce" --sizes "$CSV_SIZES" "${BENCH_ARGS[@]}" \
          --timeout-s "$TIMEOUT_S"
      done ;;
    tcp_ceil)  # one figure, repeated as a row per size so that it tabulates like the others
      local ccarg=()
      [ "$CC" != system ] && ccarg=(--cc "$CC")
      shim=0
      spawn "$out.threads" "$out.err" "$BIN/tcp_ring_ceiling" --ranks "$n" --io threads \
        --streams 4 --chunk 262144 --bytes 1073741824 "${ccarg[@]}"
      wait_all || rc=$?
      spawn "$out.poll" "$out.err" "$BIN/tcp_ring_ceiling" --ranks "$n" --io poll \
        --streams 1 --chunk 1048576 --bytes 1073741824 "${ccarg[@]}"
      ;;
  esac
  wait_all || rc=$?
  if [ "$sys" = tcp_ceil ] && [ "$rc" = 0 ]; then
    sort -g "$out".threads "$out".poll | tail -n 1 >"$out.gbps"
    jq -R --arg sizes "$CSV_SIZES" '. as $bw | [$sizes | split(",")[] | tonumber
      | {size_bytes: ., busbw_gbps: ($bw | tonumber), time_us: null, wrong: 0}]' \
      "$out.gbps" >"$out" || rc=1
  fi
  # The shim must have taken: at least one socket set, none refused.
  if [ "$shim" = 1 ] && [ "$rc" = 0 ]; then
    if grep -qh "tcp_cc_preload: .*(refused)" "$out".err* ||
       ! grep -qh "tcp_cc_preload: socket" "$out".err*; then
      echo "compare_comm.sh: $label: the congestion-control shim did not set $CC on every socket" >&2
      rc=1
    fi
  fi
  # Rows are kept when the run succeeded, or when it failed only because a row had wrong
  # values (railyard exits 1 then, after printing every row); wrong rows never reach a median.
  local parsed=0 wrong_rows=0
  if sed -n '/^\[/,/^\]/p' "$out" | jq -s 'add' >"$out.json" 2>/dev/null &&
     jq -e 'type == "array" and length > 0' "$out.json" >/dev/null; then
    parsed=1
    wrong_rows=$(jq '[.[] | select(.wrong != 0)] | length' "$out.json")
  fi
  if [ "$parsed" = 1 ] && { [ "$rc" = 0 ] || [ "$wrong_rows" != 0 ]; }; then
    jq -c --arg sys "$label" --argjson n "$n" --argjson rep "$rep" \
      '.[] | . + {system: $sys, ranks: $n, rep: $rep}' "$out.json" >>"$WORK/rows.jsonl"
  fi
  if [ "$rc" != 0 ] && [ "$wrong_rows" = 0 ]; then
    FAILED=1
    echo "compare_comm.sh: $label with $n ranks (rep $rep) failed (exit $rc); its log ends:" >&2
    cat "$out".err* 2>/dev/null | grep -v "^tcp_cc_preload: socket" | tail -n 8 >&2 || true
  fi
}

echo "# equal terms: every TCP socket uses congestion control $CC_SHOWN"
echo "# loopback ceiling"
MEMCPY=$(timeout 120 "$BIN/memcpy_bw")
echo "memcpy 64 MiB: $MEMCPY GB/s copied (read + write traffic is twice that)"
IPERF=null
if command -v iperf3 >/dev/null; then
  port=$((20000 + RANDOM % 20000))
  IPERF_CC=()
  [ "$CC" != system ] && IPERF_CC=(-C "$CC")
  spawn "$WORK/iperf-s" "$WORK/iperf-s.err" iperf3 -s -1 --forceflush -B 127.0.0.1 -p "$port"
  for _ in $(seq 50); do  # bounded wait for the server to listen
    grep -q "listening" "$WORK/iperf-s" 2>/dev/null && break
    sleep 0.1
  done
  # iperf3 can exit 0 with an error object instead of a summary (it does, rarely); the
  # ceiling is then reported as missing rather than ending the comparison.
  if timeout 60 iperf3 -c 127.0.0.1 -p "$port" --bidir -t 5 "${IPERF_CC[@]}" -J \
       >"$WORK/iperf.json" 2>&1 &&
     IPERF=$(jq -e '(.end.sum_received.bits_per_second
                     + .end.sum_received_bidir_reverse.bits_per_second) / 1e9' \
               "$WORK/iperf.json" 2>/dev/null); then
    echo "iperf3 --bidir 127.0.0.1, 5 s, $CC_SHOWN: $IPERF Gbit/s both directions together" \
      "($(awk -v g="$IPERF" 'BEGIN { printf "%.3f", g / 8 }') GB/s)"
  else
    IPERF=null
    echo "iperf3 failed, loopback TCP ceiling skipped: $(jq -r '.error? // empty' \
      "$WORK/iperf.json" 2>/dev/null || tail -n 2 "$WORK/iperf.json")"
  fi
  kill -TERM -- "-${PIDS[0]}" 2>/dev/null || true  # a server the client never reached
  wait_all || true
else
  echo "iperf3 not installed (Debian package iperf3): loopback TCP ceiling skipped"
fi

: >"$WORK/rows.jsonl"
for n in ${RANKS//,/ }; do
  for ((rep = 1; rep <= REPS; rep++)); do
    for sys in "${SYSTEMS[@]}"; do
      echo "# ranks $n, rep $rep/$REPS: $sys" >&2
      run_system "$sys" "$n" "$rep"
    done
  done
done

# shellcheck disable=SC2016 # jq variables, not shell ones
JQ_DEFS='
def median: sort | if length == 0 then null elif length % 2 == 1 then .[(length - 1) / 2]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def ratio(a; b): if a == null or b == null or b == 0 then null else a / b end;
def cell: if . == null then "-" else . end;
def r2: if . == null then "-" else (. * 100 | round) / 100 end;
def better($m; $d; $r): ($m[$d].bw) as $x | ($m[$r].bw) as $y
  | if $y == null or ($x != null and $x >= $y) then {bw: $x, t: $m[$d].t, algo: "default"}
    else {bw: $y, t: $m[$r].t, algo: "ring"} end;
# Per size: {system: {bw, t}} medians over the rows without wrong values, the better OpenMPI
# tcp algorithm, and the best peer, on equal terms (mt, peer) and as the peers run by
# default (mt_sys, peer_sys: the equal-terms runs when those need no shim).
def by_size($n; $shim): [.[] | select(.ranks == $n and .wrong == 0)] | group_by(.size_bytes)[]
  | .[0].size_bytes as $size
  | reduce group_by(.system)[] as $g ({};
      .[$g[0].system] = {bw: ($g | map(.busbw_gbps) | median), t: ($g | map(.time_us) | median)})
  | . as $m
  | (if $shim == 1 then {d: "mpi_tcp_default_sys", r: "mpi_tcp_ring_sys", g: "gloo_sys"}
     else {d: "mpi_tcp_default", r: "mpi_tcp_ring", g: "gloo"} end) as $sysn
  | {size: $size, m: $m, mt: better($m; "mpi_tcp_default"; "mpi_tcp_ring"),
     mt_sys: better($m; $sysn.d; $sysn.r), gloo_sys: $m[$sysn.g].bw}
  | .peer = ([.mt.bw, $m.gloo.bw] | map(select(. != null)) | max)
  | .peer_sys = ([.mt_sys.bw, .gloo_sys] | map(select(. != null)) | max);'
jq -s . "$WORK/rows.jsonl" >"$WORK/rows.json"
if [ -n "$JSON_OUT" ]; then
  jq --argjson memcpy "${MEMCPY:-null}" --argjson iperf "$IPERF" --arg cc "$CC" \
    --arg system_cc "$SYSTEM_CC" \
    '{cc: $cc, system_cc: $system_cc, memcpy_gbps: $memcpy, iperf3_bidir_gbitps: $iperf,
      rows: .}' "$WORK/rows.json" >"$JSON_OUT"
fi

for n in ${RANKS//,/ }; do
  echo
  echo "# allreduce f32 sum, $n ranks, busbw GB/s (median of $REPS), iters $ITERS, warm-up $WARMUP"
  echo "# equal terms: every TCP socket uses $CC_SHOWN"
  hdr=(size ry_tcp ry_shm)
  [ "$OFI" = 1 ] && hdr+=(ry_ofi)
  hdr+=("ompi_tcp(algo)" ompi_sm gloo tcp_ceil "tcp/peer" "shm/ompi_sm" "shm/tcp_peer"
        "tcp/ceil")
  printf "%9s %8s %8s" "${hdr[@]:0:3}"
  [ "$OFI" = 1 ] && printf " %8s" ry_ofi
  printf " %17s %8s %8s %8s %9s %12s %13s %9s\n" "${hdr[@]: -8}"
  jq -r --argjson n "$n" --argjson ofi "$OFI" --argjson shim "$SHIM" "$JQ_DEFS"'
    by_size($n; $shim) | [.size, .m.ry_tcp.bw, .m.ry_shm.bw]
      + (if $ofi == 1 then [.m.ry_ofi.bw] else [] end)
      + [.mt.bw, .mt.algo, .m.mpi_sm.bw, .m.gloo.bw, .m.tcp_ceil.bw, ratio(.m.ry_tcp.bw; .peer),
         ratio(.m.ry_shm.bw; .m.mpi_sm.bw), ratio(.m.ry_shm.bw; .peer),
         ratio(.m.ry_tcp.bw; .m.tcp_ceil.bw)] | map(cell) | @tsv' \
    "$WORK/rows.json" |
  awk -F'\t' -v ofi="$OFI" '
    function bw(x) { return x == "-" ? x : sprintf("%.3f", x) }
    function rt(x) { return x == "-" ? x : sprintf("%.2fx", x) }
    function sz(b) { return b >= 1048576 ? b / 1048576 "MiB" : b >= 1024 ? b / 1024 "KiB" : b "B" }
    { i = 4; o = ""; if (ofi == 1) { o = sprintf(" %8s", bw($4)); i = 5 }
      printf "%9s %8s %8s%s %17s %8s %8s %8s %9s %12s %13s %9s\n", sz($1), bw($2), bw($3), o,
        bw($i) " (" $(i + 1) ")", bw($(i + 2)), bw($(i + 3)), bw($(i + 4)), rt($(i + 5)),
        rt($(i + 6)), rt($(i + 7)), rt($(i + 8)) }'
  # On a shared machine load drifts between repetitions; a ratio inside one repetition
  # (systems run back to back) is steadier than a ratio of medians.
  jq -r --argjson n "$n" "$JQ_DEFS"'
    def best($m; $names): [$names[] as $k | $m[$k]] | map(select(. != null))
      | if length == 0 then null else max end;
    [.[] | select(.ranks == $n and .wrong == 0)] | group_by(.size_bytes)[]
    | .[0].size_bytes as $size
    | [group_by(.rep)[] | (map({key: .system, value: .busbw_gbps}) | from_entries) as $m
       | ratio($m.ry_tcp; best($m; ["mpi_tcp_default", "mpi_tcp_ring", "gloo"])) | r2]
    | "tcp/peer per repetition at \($size) B: \(map(tostring) | join(" "))"' "$WORK/rows.json"
  jq -r --argjson n "$n" --argjson shim "$SHIM" "$JQ_DEFS"'[by_size($n; $shim)][0] // empty
    | "latency at \(.size) B (time_us, median, equal terms): railyard tcp \(.m.ry_tcp.t | r2), "
      + "OpenMPI tcp \(.mt.t | r2) (\(.mt.algo)), ratio ry/ompi \(ratio(.m.ry_tcp.t; .mt.t) | r2)"' \
    "$WORK/rows.json"
  if [ "$CC_FEATURE" = 1 ]; then
    echo "# railyard (per-socket cc, a feature the peers lack): RAILYARD_TCP_CC=auto (cubic on"
    echo "# same-host sockets) against OpenMPI and Gloo as they run by default ($SYSTEM_CC)"
    printf "%9s %12s %17s %8s %9s\n" size ry_tcp_auto "ompi_tcp(algo)" gloo "tcp/peer"
    jq -r --argjson n "$n" --argjson shim "$SHIM" "$JQ_DEFS"'
      by_size($n; $shim) | [.size, .m.ry_tcp_auto.bw, .mt_sys.bw, .mt_sys.algo, .gloo_sys,
        ratio(.m.ry_tcp_auto.bw; .peer_sys)] | map(cell) | @tsv' "$WORK/rows.json" |
    awk -F'\t' '
      function bw(x) { return x == "-" ? x : sprintf("%.3f", x) }
      function rt(x) { return x == "-" ? x : sprintf("%.2fx", x) }
      function sz(b) { return b >= 1048576 ? b / 1048576 "MiB" : b >= 1024 ? b / 1024 "KiB" : b "B" }
      { printf "%9s %12s %17s %8s %9s\n", sz($1), bw($2), bw($3) " (" $4 ")", bw($5), rt($6) }'
  fi
done
echo "# tcp/peer = railyard tcp / best of (OpenMPI tcp, Gloo); shm/tcp_peer = railyard shm / same;"
echo "# tcp_ceil = bytes per rank per second of a ring of processes that only send and receive"
WRONG=$(jq -r '.[] | select(.wrong != 0)
  | "  \(.system), \(.ranks) ranks, rep \(.rep), \(.size_bytes) B: \(.wrong) of \(.checked // "?") checked elements wrong"' \
  "$WORK/rows.json")
if [ -n "$WRONG" ]; then
  printf 'compare_comm.sh: rows with wrong values, left out of the medians:\n%s\n' "$WRONG" >&2
fi
[ "$FAILED" = 0 ] || echo "compare_comm.sh: some runs failed (see above)" >&2
[ "$FAILED" = 0 ] && [ -z "$WRONG" ] || exit 1
