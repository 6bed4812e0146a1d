#!/bin/bash
# Side-by-side torch.distributed benchmark: the `railyard` backend against gloo, in the same
# run, on this host, over loopback, with the same ranks, sizes, tensors, checks and TCP
# congestion control; and railyard.torch.save against torch.save in a DDP job.
#
#   bench/compare_torch.sh [--ranks 2,4] [--sizes 1MiB,16MiB,64MiB] [--reps 3]
#                          [--warmup 10] [--iters 500] [--min-iters 10] [--budget-s 1.5]
#                          [--ddp-ranks 2] [--ddp-steps 200] [--ddp-warmup 20]
#                          [--save-reps 3] [--save-hidden 2048] [--save-layers 6]
#                          [--dir DIR] [--cc NAME|system] [--cc-feature]
#                          [--no-allreduce] [--no-ddp] [--no-save] [--wait-idle MIN]
#                          [--max-foreign PCT] [--reruns 6] [--timeout-s 300] [--json FILE]
#
# Every job is one bench/torch_bench.py (its docstring has the exact method), which starts
# the ranks itself with env:// on 127.0.0.1 (MASTER_ADDR, a free MASTER_PORT, RANK,
# WORLD_SIZE), under /usr/bin/python3 (Debian's torch 1.13) with PYTHONPATH=build/python.
#
# Systems, per repetition and rank count, in an order that rotates with the repetition:
#   ry_tcp    init_process_group("railyard"), RAILYARD_TRANSPORT=tcp,
#             RAILYARD_SOCKET_IFNAME==lo, RAILYARD_TCP_CC=--cc
#   gloo      init_process_group("gloo"), GLOO_SOCKET_IFNAME=lo; every TCP socket set to
#             --cc by the LD_PRELOAD shim bench/compare/tcp_cc_preload.c (built here), only
#             where --cc is not already the system's default
#   ry_shm    railyard, RAILYARD_TRANSPORT=shm: Railyard's shared-memory transport between
#             ranks of one host, which gloo lacks; a separately labelled feature row
#   with --cc-feature also ry_tcp_auto (RAILYARD_TCP_CC=auto: Railyard's own per-socket
#   choice) and gloo_sys (gloo without the shim: the system's default): the per-socket
#   congestion-control feature row, not equal terms.
# Equal terms: ry_tcp against gloo. --cc defaults to the algorithm Railyard picks itself
# for same-host connections (cubic, reno where cubic is missing); `system` is the host's
# default (net.ipv4.tcp_congestion_control) for both. Checked, not assumed: before each job
# ends every rank lists its connected TCP sockets (torch's store's left out) with their
# congestion control and bytes sent (TCP_INFO); a tcp job where less than 99% of the bytes
# went out on sockets using the expected algorithm fails.
#
# Parts (bench/torch_bench.py): allreduce, f32 sum, in place, per size: one checked
# allreduce, --warmup untimed, then as many timed as fit in --budget-s (at the warm-up's
# pace; at least --min-iters, at most --iters), the first, sampled timed ones and the last
# checked; time = the slowest rank's mean; busbw = bytes / time x 2(n-1)/n (nccl-tests).
# ddp, with ranks in --ddp-ranks: examples/torch_ddp.py's model and batches under
# DistributedDataParallel, --ddp-warmup untimed steps then --ddp-steps timed; figure: the
# median over steps of the slowest rank's step time; the ranks' weights must be bitwise
# equal, and every backend's final weights must agree with gloo's (1e-4 relative on their
# sum). save, once after the rest: 2 ranks on railyard (shm), a model of --save-layers
# Linear(--save-hidden, --save-hidden) (302 MB of state with Adam at 2048 x 6), --save-reps
# rounds of railyard.torch.save synchronous and asynchronous (each rank writes its 1/2,
# fsyncs, atomic commit), torch.save on rank 0 + barrier (no fsync: it never does), and
# torch.save + fsync + rename + directory fsync on rank 0 + barrier; every save is loaded
# back and compared with the state at the call. Its checkpoints go to a temp directory under
# --dir (default /var/tmp), which must not be tmpfs; removed on exit.
#
# Wrong values (any part), a failed job or a congestion-control mismatch: named on stderr,
# left out of the medians, and the script exits 1 after printing the tables. Every job runs
# under `timeout` in its own process group, killed on exit. Only meaningful on an idle host:
# --wait-idle MIN polls every 30 s, at most MIN minutes, until no ninja, cc1plus, ctest or
# pytest runs and the CPUs are at most 15% busy over 3 s (without it the script only warns).
# Other load is also measured during every job (the machine's CPU time from /proc/stat less
# the job's own): a job during which other processes took more than --max-foreign percent
# (default 10) of the CPUs is run again, up to --reruns times in all; the tables say how many
# jobs were disturbed and by how much.
#
# Examples:
#   bench/compare_torch.sh                                   # everything, about 6 minutes
#   bench/compare_torch.sh --no-save --ranks 2 --reps 5 --sizes 16MiB
#   bench/compare_torch.sh --no-allreduce --no-ddp --save-reps 5 --json /tmp/save.json
set -euo pipefail

RANKS=2,4
SIZES=1MiB,16MiB,64MiB
REPS=3
WARMUP=10
ITERS=500
MIN_ITERS=10
BUDGET_S=1.5
DDP_RANKS=2
DDP_STEPS=200
DDP_WARMUP=20
SAVE_REPS=3
SAVE_HIDDEN=2048
SAVE_LAYERS=6
SAVE_DIR=${TMPDIR_SAVE:-/var/tmp}
CC=
CC_FEATURE=0
DO_ALLREDUCE=1
DO_DDP=1
DO_SAVE=1
WAIT_IDLE=0
MAX_FOREIGN=10
RERUNS=6
TIMEOUT_S=300
JSON_OUT=
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3  # Debian's interpreter, the one python3-torch is installed for
PYPATH=${RAILYARD_PYTHONPATH:-"$ROOT/build/python"}

die() { echo "compare_torch.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --min-iters) MIN_ITERS=$2; shift 2 ;;
    --budget-s) BUDGET_S=$2; shift 2 ;;
    --ddp-ranks) DDP_RANKS=$2; shift 2 ;;
    --ddp-steps) DDP_STEPS=$2; shift 2 ;;
    --ddp-warmup) DDP_WARMUP=$2; shift 2 ;;
    --save-reps) SAVE_REPS=$2; shift 2 ;;
    --save-hidden) SAVE_HIDDEN=$2; shift 2 ;;
    --save-layers) SAVE_LAYERS=$2; shift 2 ;;
    --dir) SAVE_DIR=$2; shift 2 ;;
    --cc) CC=$2; shift 2 ;;
    --cc-feature) CC_FEATURE=1; shift ;;
    --no-allreduce) DO_ALLREDUCE=0; shift ;;
    --no-ddp) DO_DDP=0; shift ;;
    --no-save) DO_SAVE=0; shift ;;
    --wait-idle) WAIT_IDLE=$2; shift 2 ;;
    --max-foreign) MAX_FOREIGN=$2; shift 2 ;;
    --reruns) RERUNS=$2; shift 2 ;;
    --timeout-s) TIMEOUT_S=$2; shift 2 ;;
    --json) JSON_OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^set/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in "$REPS" "$WARMUP" "$ITERS" "$MIN_ITERS" "$DDP_STEPS" "$DDP_WARMUP" "$SAVE_REPS" \
         "$SAVE_HIDDEN" "$SAVE_LAYERS" "$WAIT_IDLE" "$MAX_FOREIGN" "$RERUNS" "$TIMEOUT_S" ${RANKS//,/ } ${DDP_RANKS//,/ }; do
  [[ $v =~ ^[0-9]+$ ]] || die "expected a non-negative integer, got '$v'"
done
[[ $BUDGET_S =~ ^[0-9]*\.?[0-9]+$ ]] || die "--budget-s '$BUDGET_S': expected seconds (1.5)"
[ "$REPS" -ge 1 ] && [ "$SAVE_REPS" -ge 1 ] || die "--reps and --save-reps: 1 or more"
[ "$ITERS" -ge 1 ] && [ "$MIN_ITERS" -ge 1 ] && [ "$MIN_ITERS" -le "$ITERS" ] ||
  die "need 1 <= --min-iters ($MIN_ITERS) <= --iters ($ITERS)"
[ "$DDP_STEPS" -ge 1 ] || die "--ddp-steps: 1 or more"
[ "$TIMEOUT_S" -ge 30 ] || die "--timeout-s $TIMEOUT_S: expected 30 or more"
for n in ${RANKS//,/ } ${DDP_RANKS//,/ }; do [ "$n" -ge 2 ] || die "ranks: 2 or more, got $n"; done
for tool in timeout numfmt gcc findmnt; do
  command -v "$tool" >/dev/null || die "$tool not found (coreutils, gcc, util-linux)"
done
[ -x "$PY" ] || die "$PY not found: Debian's python3 (with python3-torch) is what this uses"
"$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
  die "$PY cannot import torch with gloo (python3-torch)"
compgen -G "$PYPATH/railyard/_torch*.so" >/dev/null ||
  die "$PYPATH/railyard/_torch*.so not found: build Railyard with libtorch-dev (make build), or set RAILYARD_PYTHONPATH"
if [ "$DO_SAVE" = 1 ] && [ ! -f "$PYPATH/railyard/torch/checkpoint.py" ]; then
  echo "compare_torch.sh: $PYPATH/railyard/torch/checkpoint.py not found: the save part is skipped" >&2
  DO_SAVE=0
fi
[ "$DO_DDP" = 1 ] || DDP_RANKS=
[ "$DO_ALLREDUCE" = 1 ] || [ -n "$DDP_RANKS" ] || [ "$DO_SAVE" = 1 ] ||
  die "nothing to run: every part is switched off"
export PYTHONPATH="$PYPATH${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1

bytes_of() {
  case "$1" in
    *iB) numfmt --from=iec-i "${1%B}" ;;
    *B) numfmt --from=si "${1%B}" ;;
    *) echo "$1" ;;
  esac
}
SIZE_LIST=()
for s in ${SIZES//,/ }; do
  b=$(bytes_of "$s") || die "--sizes: '$s' is not a size"
  [ "$b" -ge 64 ] && [ $((b % 4)) = 0 ] || die "--sizes: '$s' must be at least 64 B, whole f32"
  SIZE_LIST+=("$b")
done
CSV_SIZES=$(IFS=,; echo "${SIZE_LIST[*]}")

# The congestion control of the equal-terms rows (as bench/compare_comm.sh picks it).
cc_settable() {
  "$PY" -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode())' \
    "$1" 2>/dev/null
}
SYSTEM_CC=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
AUTO_CC=reno  # what RAILYARD_TCP_CC=auto sets on same-host sockets (net/tcp/congestion.h)
cc_settable cubic && AUTO_CC=cubic
[ -n "$CC" ] || CC=$AUTO_CC
[ "$CC" = system ] || [[ $CC =~ ^[a-z0-9_]{1,15}$ ]] ||
  die "--cc '$CC': expected an algorithm name such as cubic, or system"
[ "$CC" = system ] || cc_settable "$CC" ||
  die "--cc $CC: this host cannot set it (available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
CC_EXPECT=$CC
[ "$CC" = system ] && CC_EXPECT=$SYSTEM_CC
SHIM=0
[ "$CC_EXPECT" != "$SYSTEM_CC" ] && SHIM=1

if [ "$DO_SAVE" = 1 ]; then
  [ -d "$SAVE_DIR" ] || die "--dir $SAVE_DIR: no such directory"
  fstype=$(findmnt -n -o FSTYPE -T "$SAVE_DIR")
  case "$fstype" in
    tmpfs|ramfs) die "--dir $SAVE_DIR is on $fstype: saves must reach a disk (try --dir /var/tmp)" ;;
  esac
fi

# Busy: a build or test runs, or the CPUs were more than 15% busy over 3 s (other
# benchmarks, a test's ranks started by multiprocessing, which the names above miss).
cpu_busy_pct() {
  local a b
  read -ra a < <(head -n 1 /proc/stat)
  sleep 3
  read -ra b < <(head -n 1 /proc/stat)
  local i tot=0 idle
  for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(( tot > 0 ? 100 * (tot - idle) / tot : 0 ))
}
busy() { pgrep -f "ninja|cc1plus|ctest|pytest" >/dev/null || [ "$(cpu_busy_pct)" -gt 15 ]; }
if busy; then
  if [ "$WAIT_IDLE" -gt 0 ]; then
    echo "# waiting (at most $WAIT_IDLE min) for builds and tests to end"
    for ((i = 0; i < WAIT_IDLE * 2; i++)); do busy || break; sleep 30; done
  fi
  busy && echo "compare_torch.sh: warning: a build, a test or other load is running; figures will be low and noisy" >&2
fi

WORK=$(mktemp -d /tmp/railyard-compare-torch.XXXXXX)
CKPT=
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL -- "-$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
  [ -z "$CKPT" ] || rm -rf "$CKPT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/out"
if [ "$DO_SAVE" = 1 ]; then CKPT=$(mktemp -d "$SAVE_DIR/railyard-compare-torch.XXXXXX"); fi
if [ "$SHIM" = 1 ] || [ "$CC_FEATURE" = 1 ]; then
  timeout 120 gcc -O2 -shared -fPIC -o "$WORK/tcp_cc_preload.so" "$HERE/compare/tcp_cc_preload.c" -ldl
fi

# run_job LABEL RANKS REP PARTS [torch_bench args...]: one job; its stdout (rank 0's JSON
# line), stderr and exit status into $WORK/out/LABEL.RANKS.REP.{json,err,rc}.
run_job() {
  local label=$1 n=$2 rep=$3 parts=$4 rc=0
  shift 4
  local out=$WORK/out/$label.$n.$rep backend=railyard
  local -a envs=() extra=()
  case "$label" in
    ry_tcp) envs=(RAILYARD_TRANSPORT=tcp RAILYARD_SOCKET_IFNAME==lo RAILYARD_TCP_CC="$CC") ;;
    ry_tcp_auto) envs=(RAILYARD_TRANSPORT=tcp RAILYARD_SOCKET_IFNAME==lo RAILYARD_TCP_CC=auto) ;;
    ry_shm|save) envs=(RAILYARD_TRANSPORT=shm RAILYARD_SOCKET_IFNAME==lo) ;;
    gloo)
      backend=gloo
      envs=(GLOO_SOCKET_IFNAME=lo)
      if [ "$SHIM" = 1 ]; then
        extra=(--preload "$WORK/tcp_cc_preload.so")
        envs+=(RY_PRELOAD_TCP_CC="$CC_EXPECT")
      fi ;;
    gloo_sys) backend=gloo; envs=(GLOO_SOCKET_IFNAME=lo) ;;
  esac
  echo "# $label, $n ranks, rep $rep: $parts" >&2
  timeout -k 5 "$TIMEOUT_S" env "${envs[@]}" "$PY" "$HERE/torch_bench.py" --nproc "$n" \
    --backend "$backend" --timeout-s "$((TIMEOUT_S - 10))" "${extra[@]}" "$parts" "$@" \
    >"$out.json" 2>"$out.err" </dev/null &
  PIDS+=("$!")
  wait "$!" || rc=$?
  PIDS=()
  echo "$rc" >"$out.rc"
  # Other load during the job, in percent of the CPUs; too much: once more, while reruns last.
  local foreign
  foreign=$("$PY" -c 'import json, os, sys
l = [x for x in open(sys.argv[1]).read().splitlines() if x.startswith("{")]
d = json.loads(l[-1]).get("load") if l else None
print(round(100 * d["foreign_cpu_s"] / (d["wall_s"] * os.cpu_count())) if d else 0)' "$out.json" 2>/dev/null || echo 0)
  if [ "$rc" = 0 ] && [ "$foreign" -gt "$MAX_FOREIGN" ] && [ "$RERUNS" -gt 0 ]; then
    RERUNS=$((RERUNS - 1))
    echo "# $label, $n ranks, rep $rep: other processes took $foreign% of the CPUs; again" >&2
    mv "$out.json" "$out.disturbed.$RERUNS"
    run_job "$label" "$n" "$rep" "$parts" "$@"
    return
  fi
  if [ "$rc" != 0 ]; then
    echo "compare_torch.sh: $label, $n ranks, rep $rep exited $rc; its log ends:" >&2
    grep -v "^tcp_cc_preload: socket" "$out.err" | tail -n 6 >&2 || true
  fi
}

echo "# machine: $(nproc) cores, kernel $(uname -r), torch $("$PY" -c 'import torch; print(torch.__version__)'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# equal terms: every TCP socket of ry_tcp and gloo uses $CC_EXPECT (system default $SYSTEM_CC$([ "$SHIM" = 1 ] && echo ", gloo's set by the LD_PRELOAD shim"))"
SYSTEMS=(ry_tcp gloo ry_shm)
[ "$CC_FEATURE" = 1 ] && SYSTEMS+=(ry_tcp_auto gloo_sys)
AR_ARGS=(--sizes "$CSV_SIZES" --warmup "$WARMUP" --iters "$ITERS" --min-iters "$MIN_ITERS"
         --budget-s "$BUDGET_S")
DDP_ARGS=(--steps "$DDP_STEPS" --warmup-steps "$DDP_WARMUP")
T0=$SECONDS
ALL_RANKS=$(echo "${RANKS//,/ } ${DDP_RANKS//,/ }" | tr ' ' '\n' | grep . | sort -nu | tr '\n' ' ')
for ((rep = 1; rep <= REPS; rep++)); do
  for n in $ALL_RANKS; do
    parts=()
    [ "$DO_ALLREDUCE" = 1 ] && [[ ,$RANKS, == *,$n,* ]] && parts+=(allreduce)
    [[ ,$DDP_RANKS, == *,$n,* ]] && parts+=(ddp)
    [ ${#parts[@]} -gt 0 ] || continue
    joined=$(IFS=+; echo "${parts[*]}")
    k=$(( (rep - 1) % ${#SYSTEMS[@]} ))
    for sys in "${SYSTEMS[@]:k}" "${SYSTEMS[@]:0:k}"; do
      run_job "$sys" "$n" "$rep" "$joined" "${AR_ARGS[@]}" "${DDP_ARGS[@]}"
    done
  done
done
if [ "$DO_SAVE" = 1 ]; then
  echo "# save: checkpoints under $CKPT ($(findmnt -n -o SOURCE,FSTYPE -T "$CKPT"))"
  run_job save 2 1 save --dir "$CKPT" --reps "$SAVE_REPS" --hidden "$SAVE_HIDDEN" \
    --layers "$SAVE_LAYERS" --warmup-steps 3
fi
echo "# jobs took $((SECONDS - T0)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"

cat >"$WORK/analyze.py" <<'PY'
import glob, json, os, sys

work, cc, system_cc, auto_cc, shim, reps, json_out = sys.argv[1:8]
reps = int(reps)
problems = []

def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2

jobs = []
for path in sorted(glob.glob(f"{work}/out/*.rc")):
    base = path[:-3]
    label, n, rep = os.path.basename(base).rsplit(".", 2)
    rc = int(open(path).read())
    lines = [l for l in open(base + ".json").read().splitlines() if l.startswith("{")]
    doc = json.loads(lines[-1]) if lines else None
    jobs.append({"label": label, "ranks": int(n), "rep": int(rep), "rc": rc, "doc": doc})
    if doc is None:
        problems.append(f"{label}, {n} ranks, rep {rep}: no result (exit {rc})")
        continue
    if rc != 0:
        problems.append(f"{label}, {n} ranks, rep {rep}: exit {rc}")
    # Equal terms, checked: the bytes sent on sockets of the expected congestion control.
    want = {"ry_tcp": cc, "gloo": cc, "ry_tcp_auto": auto_cc, "gloo_sys": system_cc}.get(label)
    if want:
        total = on = 0
        for census in doc.get("sockets") or []:
            for algo, c in (census or {}).items():
                total += c["bytes"]
                on += c["bytes"] if algo == want else 0
        doc["cc_share"] = on / total if total else 0.0
        if total == 0 or on < 0.99 * total:
            problems.append(f"{label}, {n} ranks, rep {rep}: only {on} of {total} bytes went out "
                            f"on {want} sockets: {doc.get('sockets')}")
            doc["cc_bad"] = True

def good(j):
    return j["doc"] is not None and not j["doc"].get("cc_bad")

out = {"cc": cc, "system_cc": system_cc, "jobs": jobs}
labels = ["ry_tcp", "gloo", "ry_shm", "ry_tcp_auto", "gloo_sys"]

def fmt(x, w=8, p=3, suffix=""):
    return f"{'-':>{w}}" if x is None else f"{x:>{w - len(suffix)}.{p}f}{suffix}"

def sz(b):
    return f"{b // 1048576}MiB" if b >= 1048576 else f"{b // 1024}KiB" if b >= 1024 else f"{b}B"

# -- allreduce --
ar = {}  # (label, ranks, size) -> [(rep, busbw)]
for j in jobs:
    if not good(j):
        continue
    for r in j["doc"].get("allreduce") or []:
        if r["wrong"]:
            problems.append(f"{j['label']}, {j['ranks']} ranks, rep {j['rep']}, "
                            f"{r['size_bytes']} B: {r['wrong']} wrong elements")
            continue
        ar.setdefault((j["label"], j["ranks"], r["size_bytes"]), []).append(
            (j["rep"], r["busbw_gbps"], r["iters"]))
targets = {2: 1.5, 4: 1.2}
verdicts = []
if ar:
    present = [l for l in labels if any(k[0] == l for k in ar)]
    for n in sorted({k[1] for k in ar}):
        print(f"\n# allreduce f32 sum (torch.distributed.all_reduce, in place), {n} ranks, busbw GB/s, "
              f"median of {reps}; equal terms: ry_tcp and gloo on {cc}")
        head = f"{'size':>6} {'iters':>9} {'ry_tcp':>8} {'gloo':>8} {'tcp/gloo':>9} {'per rep':>16} {'target':>7}"
        head += f" {'ry_shm':>8} {'shm/gloo':>9}"
        if "ry_tcp_auto" in present:
            head += f" {'ry_auto':>8} {'gloo_sys':>8} {'auto/sys':>9}"
        print(head)
        for size in sorted({k[2] for k in ar if k[1] == n}):
            def med(l):
                return median([b for _, b, _ in ar.get((l, n, size), [])])
            def per_rep(a, b):
                x = dict((r, v) for r, v, _ in ar.get((a, n, size), []))
                y = dict((r, v) for r, v, _ in ar.get((b, n, size), []))
                return [x[r] / y[r] for r in sorted(x) if r in y and y[r]]
            iters = sorted({i for l in ("ry_tcp", "gloo") for _, _, i in ar.get((l, n, size), [])})
            it = f"{iters[0]}-{iters[-1]}" if iters else "-"
            t, g, s = med("ry_tcp"), med("gloo"), med("ry_shm")
            ratio = t / g if t and g else None
            pr = " ".join(f"{x:.2f}" for x in per_rep("ry_tcp", "gloo"))
            tgt = targets.get(n) if size >= 16 << 20 else None
            line = (f"{sz(size):>6} {it:>9} {fmt(t)} {fmt(g)} {fmt(ratio, 9, 2, 'x')} {pr:>16} "
                    f"{fmt(tgt, 7, 1, 'x')} {fmt(s)} {fmt(s / g if s and g else None, 9, 2, 'x')}")
            if "ry_tcp_auto" in present:
                a, gs = med("ry_tcp_auto"), med("gloo_sys")
                line += f" {fmt(a)} {fmt(gs)} {fmt(a / gs if a and gs else None, 9, 2, 'x')}"
            print(line)
            if tgt is not None:
                verdicts.append((f"allreduce {n} ranks {sz(size)}: ry_tcp/gloo >= {tgt}x",
                                 ratio, ratio is not None and ratio >= tgt))
    print("# tcp/gloo: ratio of the medians; per rep: the ratio inside each repetition "
          "(the two ran back to back)")

# -- ddp --
ddp = {}
for j in jobs:
    d = good(j) and j["doc"].get("ddp")
    if d:
        if not d["ranks_equal"]:
            problems.append(f"{j['label']}, {j['ranks']} ranks, rep {j['rep']}: DDP ranks' weights differ")
            continue
        ddp.setdefault((j["label"], j["ranks"]), []).append((j["rep"], d))
if ddp:
    first = next(iter(ddp.values()))[0][1]
    print(f"\n# DDP step time, ms (examples/torch_ddp.py's model: {first['params']} parameters, "
          f"hidden {first['hidden']}, batch {first['batch']}; {first['steps']} timed steps after "
          f"{first['warmup_steps']}; median over steps of the slowest rank, then median of {reps})")
    print(f"{'ranks':>5} {'system':>12} {'median':>8} {'mean':>8} {'per rep (median)':>24} {'gloo/this':>10}")
    for n in sorted({k[1] for k in ddp}):
        ref = ddp.get(("gloo", n), [])
        ref_sum = {r: d["weight_sum"] for r, d in ref}
        gmed = median([d["step_ms_median"] for _, d in ref])
        for l in labels:
            rows = ddp.get((l, n))
            if not rows:
                continue
            m = median([d["step_ms_median"] for _, d in rows])
            mean = median([d["step_ms_mean"] for _, d in rows])
            pr = " ".join(f"{d['step_ms_median']:.2f}" for _, d in sorted(rows, key=lambda x: x[0]))
            print(f"{n:>5} {l:>12} {fmt(m, 8, 2)} {fmt(mean, 8, 2)} {pr:>24} "
                  f"{fmt(gmed / m if gmed and m else None, 10, 2, 'x')}")
            for r, d in rows:
                w = ref_sum.get(r, next(iter(ref_sum.values()), None))
                if w is not None and abs(d["weight_sum"] - w) > 1e-4 * abs(w):
                    problems.append(f"{l}, {n} ranks, rep {r}: DDP weights sum {d['weight_sum']!r} "
                                    f"differ from gloo's {w!r}")
        sums = sorted({d["weight_sum"] for l in labels for _, d in ddp.get((l, n), [])})
        if sums:
            print(f"# {n} ranks: final weight sums, all systems and reps: {sums[0]!r} .. {sums[-1]!r}")

# -- save --
save = [j for j in jobs if j["label"] == "save" and j["doc"] is not None]
if save:
    s = save[0]["doc"]["save"]
    for p in s["problems"]:
        problems.append(f"save: {p}")
    rows = [r for r in s["rows"] if not r["wrong"]]
    for r in s["rows"]:
        if r["wrong"]:
            problems.append(f"save: {r['method']} rep {r['rep']}: {r['wrong']} wrong values on load")
    by = {}
    for r in rows:
        by.setdefault(r["method"], []).append(r)
    def m(method, key):
        return median([r.get(key) for r in by.get(method, [])])
    print(f"\n# checkpoint save, DDP job of 2 ranks (railyard shm), {s['params']} parameters, "
          f"{s['state_bytes'] / 1e6:.0f} MB of state (model + Adam), {len(by.get('ry_sync', []))} rounds; "
          f"ms, medians")
    print(f"{'method':>36} {'stall':>8} {'save':>8} {'cpu':>8} {'other':>44} {'fsync':>6} {'atomic':>7}")
    desc = {
        "ry_sync": ("railyard.torch.save", "yes", "yes"),
        "ry_async": ("railyard.torch.save asynchronous", "yes", "yes"),
        "torch": ("torch.save on rank 0 + barrier", "no", "no"),
        "torch_fsync": ("torch.save + fsync + rename, rank 0", "yes", "yes"),
    }
    for method, (name, fs, at) in desc.items():
        if method not in by:
            continue
        other = ""
        if method == "ry_async":
            other = (f"wait {m(method, 'wait_ms'):.1f}, in-flight steps +{m(method, 'steps_extra_ms'):.0f}"
                     f", lost {m(method, 'lost_ms'):.0f}")
        if method == "torch":
            other = f"os.sync() after it {m(method, 'writeback_ms'):.0f}"
        save_ms = m(method, "save_ms")
        if method == "ry_async":
            save_ms = m(method, "done_within_ms")
        print(f"{name:>36} {fmt(m(method, 'stall_ms'), 8, 1)} {fmt(save_ms, 8, 1)} "
              f"{fmt(m(method, 'cpu_ms'), 8, 0)} {other:>44} {fs:>6} {at:>7}")
    base = m("ry_async", "baseline_step_ms")
    if base:
        print(f"# baseline training step (no save in flight) {base:.0f} ms, "
              f"{m('ry_async', 'baseline_step_cpu_ms'):.0f} ms CPU (both ranks); asynchronous: "
              f"save = when the handle was first seen done (checked after each step), lost = "
              f"call -> wait end minus the steps' baseline; cpu = CPU time of both ranks' "
              f"processes during the save (asynchronous: less the steps' baseline CPU)")
    stall_async, stall_sync = m("ry_async", "stall_ms"), m("ry_sync", "stall_ms")
    for ref in ("torch", "torch_fsync"):
        st = m(ref, "stall_ms")
        for mine, v in (("ry_async", stall_async), ("ry_sync", stall_sync)):
            if st and v:
                r = st / v
                print(f"# stall {ref} / {mine}: {r:.2f}x")
                if mine == "ry_async":
                    verdicts.append((f"save stall: {ref} / railyard async >= 2x", r, r >= 2))
    out["save"] = s

loads = [(j, j["doc"]["load"]) for j in jobs if j["doc"] and j["doc"].get("load")]
if loads:
    cores = os.cpu_count()
    share = sorted((100 * l["foreign_cpu_s"] / (l["wall_s"] * cores), j["label"], j["ranks"], j["rep"])
                   for j, l in loads)
    reruns = len(glob.glob(f"{work}/out/*.disturbed.*"))
    worst = share[-1]
    print(f"\n# other load during the jobs (CPU time beyond the job's own, % of {cores} CPUs): "
          f"median {median([x[0] for x in share]):.1f}%, worst {worst[0]:.1f}% ({worst[1]}, "
          f"{worst[2]} ranks, rep {worst[3]}); jobs run again for it: {reruns}")
    out["foreign_pct"] = [{"label": b, "ranks": c, "rep": d, "pct": a} for a, b, c, d in share]

if verdicts:
    print("\n# targets")
    for name, v, ok in verdicts:
        print(f"{name:<52} {fmt(v, 7, 2, 'x')}  {'met' if ok else 'MISSED'}")
out["verdicts"] = [{"target": a, "value": b, "met": c} for a, b, c in verdicts]
out["problems"] = problems
if json_out:
    with open(json_out, "w") as f:
        json.dump(out, f, indent=1)
if problems:
    print("compare_torch.sh: wrong values, failed jobs or unequal terms (left out of the medians):",
          file=sys.stderr)
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    sys.exit(1)
PY
"$PY" "$WORK/analyze.py" "$WORK" "$CC_EXPECT" "$SYSTEM_CC" "$AUTO_CC" "$SHIM" "$REPS" "$JSON_OUT"
