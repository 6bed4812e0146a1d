#!/bin/bash
# Side-by-side recovery benchmark: what torchrun's elastic restart costs after a rank is
# SIGKILLed, next to `railyard bench recover`, on this machine, over loopback only, with the
# same world size (4 ranks), steps, checkpoint interval and kill step.
#
#   bench/compare_recover.sh [--reps 5] [--steps 100] [--ckpt-every 10] [--kill-at-step N]
#                            [--monitor-interval 5] [--fast-interval 0.1 | --no-fast]
#                            [--railyard build/railyard]
#                            [--train-binary build/examples/train/railyard_train_example]
#                            [--no-railyard] [--timeout-s 300] [--json FILE]
#
# The jobs. Railyard: `railyard bench recover --repeat 1 --json --hosts local:3 --spares 1
# --nproc-per-host 2` (4 ranks on two pretend hosts, a spare host) with the example trainer
# (examples/train: a 2,177-parameter MLP, data-parallel, asynchronous checkpoints). torch:
# bench/torchrun_recover.py (the same MLP, DDP on gloo over CPU, rank 0 saving a checkpoint
# synchronously) under
#   /usr/bin/torchrun --standalone --nnodes=1 --nproc_per_node=4 --max_restarts=1
#                     --monitor_interval=X --redirects=9:0 --tee=9:0
# (torch 1.13 spells its flags with underscores; the --redirects/--tee mapping only works
# around torch 1.13 under Python 3.11, where the default "0" parses to None and torchrun dies
# with "'NoneType' object has no attribute 'get'" before starting a worker.) On both, rank 1
# SIGKILLs itself before --kill-at-step on the first attempt, once the checkpoint before
# that step is on disk, and every rank resumes from that checkpoint.
#
# Order. A torch run without a fault first: its final weight hash is the reference every
# torch run must end with (railyard checks its own against its own uninterrupted run). Then
# --reps repetitions, each: one railyard run, one torchrun run with --monitor-interval (the
# default is torch 1.13's own, 5 s: what a user gets), and one with --fast-interval (0.1 s
# unless --no-fast; a tuned agent, labelled as such), so that other load on the machine
# spreads over all of them.
#
# The figures (ms). Railyard's are its launcher's own (its `recovered` event, monotonic
# clock; the launcher reads its agents' statuses every 100 ms). torchrun's come from
# bench/torchrun_recover.py's events (CLOCK_REALTIME, ns, written by each rank) and from
# torchrun's own log lines (LOGLEVEL=INFO), each stamped by this script when read from the
# pipe (bash $EPOCHREALTIME, the same clock):
#   detect    railyard: the dead rank's end (stamped by its host agent's reap) -> the launcher
#             decides the attempt failed.
#             torchrun: the dead rank's `kill` event (just before it SIGKILLs itself) -> the
#             agent's first poll that sees a failure: its first "closing signal SIGTERM" or
#             "failed (exitcode" line: the rest of the agent's sleep between two polls, so
#             anywhere from 0 to one monitor interval, by where the death falls in its cycle.
#   stop      railyard: that decision -> every agent reported its ranks ended (0 when they had
#             already exited on their own).
#             torchrun: that poll -> its "failed (exitcode" line, which the agent writes once
#             it has reaped every worker it sent SIGTERM to (0 when all had exited already).
#   det+stop  detect + stop: the death -> every rank of the failed attempt gone.
#   restart   railyard: every rank ended -> every rank of the next attempt running.
#             torchrun: the same end -> every new process's `start` event (its first line,
#             before torch is imported; so Python's own start-up is in it): the agent's
#             rendezvous on its c10d store and the spawn of 4 interpreters.
#   resume    both: every new rank running -> every rank finished its first step. torchrun:
#             import torch, init_process_group (rendezvous on the worker store, gloo's full
#             mesh), torch.load of the checkpoint, DDP's broadcast, one step. Railyard: the
#             trainer's start-up (its store, ring connections, loading and verifying the
#             checkpoint), one step. Railyard sees a step at its next status read (<= 100 ms).
#   total     both: the death -> every rank stepping again.
#   lost      railyard's formula on both: highest step any rank finished before the failure
#             + 1 - the checkpoint step resumed from (so with steps 51-54 redone after
#             checkpoint 50 it says 5: it counts one more than the steps actually redone).
#   run_s     the whole run, start to exit (torchrun's end also waits for a monitor poll).
# The torch breakdown table splits its figures: peers_end (death -> the last survivor's own
# `sigterm` or `exit` event: gloo fails their allreduce with "Connection reset by peer"
# within tens of ms, so they are usually gone long before the agent looks), and the agent's
# and the new ranks' phases, each the moment the last rank got there.
#
# Correct runs: railyard: its own check (one restart, rank 1 blamed, weights byte-identical
# to its uninterrupted run). torchrun: exit 0, exactly one restart, all 4 ranks ended with
# one hash, equal to the reference run's. A run that is not correct is marked and left out of
# the medians; the script then exits 1 after printing the tables.
#
# Not equal (say so wherever the numbers are quoted): railyard swaps in a spare host, torchrun
# restarts the same 4 local processes on the same node (--nnodes=1, no spare); torchrun's
# detection is a poll every --monitor-interval, railyard's a reap pushed by its agents and
# read every 100 ms; the figures on each side come from different observers (the launcher's
# status reads against the ranks' and agent's own stamps: railyard's are late by up to one
# status read per phase, torchrun's by the pipe's read of a log line, about a ms); a Python
# rank pays for interpreter start and `import torch` on every restart (about 1.2 s for one
# process alone here; 2-4 s for four at once on 2 cores), the C++ trainer for neither; a
# torch rank also runs one throw-away backward at start (bench/torchrun_recover.py: it keeps
# DDP's bucket rebuild from changing a resumed run's rounding; a few ms); railyard's trainer verifies checksums of the checkpoint it
# loads, torch.load does not; railyard's checkpoint is asynchronous on every rank, torch's
# synchronous on rank 0 (neither is inside the recovery figures, since the kill waits for it).
#
# Everything lives in one mktemp -d directory (TMPDIR of every run too), removed on exit;
# every run is bounded by `timeout` in its own session, and any of those sessions still
# alive at exit is killed (SIGTERM, then SIGKILL). torchrun --standalone serves its
# rendezvous on localhost:29400, so that port must be free; gloo is kept on lo
# (GLOO_SOCKET_IFNAME=lo). Needs: /usr/bin/python3 with torch (Debian's python3-torch
# 1.13), /usr/bin/torchrun, timeout, setsid; a built railyard unless --no-railyard.
#
# Examples:
#   bench/compare_recover.sh                          # 5 reps, 100 steps, rank 1 killed at 55
#   bench/compare_recover.sh --reps 3 --no-fast --json /tmp/recover.json
#   bench/compare_recover.sh --reps 1 --steps 40 --kill-at-step 25 --no-railyard
set -euo pipefail
export LC_ALL=C  # $EPOCHREALTIME with a '.' whatever the locale

REPS=5
STEPS=100
CKPT_EVERY=10
KILL_AT=
KILL_RANK=1
MONITOR=5  # torch 1.13's default: torch/distributed/run.py, --monitor_interval default=5
FAST=0.1
RAILYARD_ON=1
TIMEOUT_S=300
JSON_OUT=
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RAILYARD="$ROOT/build/railyard"
TRAIN="$ROOT/build/examples/train/railyard_train_example"
PY=/usr/bin/python3  # Debian's interpreter, the one python3-torch is installed for
TORCHRUN=/usr/bin/torchrun
SCRIPT="$HERE/torchrun_recover.py"

die() { echo "compare_recover.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --ckpt-every) CKPT_EVERY=$2; shift 2 ;;
    --kill-at-step) KILL_AT=$2; shift 2 ;;
    --monitor-interval) MONITOR=$2; shift 2 ;;
    --fast-interval) FAST=$2; shift 2 ;;
    --no-fast) FAST=; shift ;;
    --railyard) RAILYARD=$2; shift 2 ;;
    --train-binary) TRAIN=$2; shift 2 ;;
    --no-railyard) RAILYARD_ON=0; shift ;;
    --timeout-s) TIMEOUT_S=$2; shift 2 ;;
    --json) JSON_OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^set/!s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in "$REPS" "$STEPS" "$CKPT_EVERY" "$TIMEOUT_S" ${KILL_AT:+"$KILL_AT"}; do
  [[ $v =~ ^[0-9]+$ ]] || die "expected a non-negative integer, got '$v'"
done
for v in "$MONITOR" ${FAST:+"$FAST"}; do
  [[ $v =~ ^[0-9]*\.?[0-9]+$ ]] && [[ ! $v =~ ^0*\.?0*$ ]] ||
    die "a monitor interval is a positive number of seconds (5, 0.1), got '$v'"
done
[ "$REPS" -ge 1 ] || die "--reps $REPS: expected 1 or more"
[ "$STEPS" -ge 2 ] || die "--steps $STEPS: expected 2 or more"
[ "$CKPT_EVERY" -ge 1 ] || die "--ckpt-every $CKPT_EVERY: expected 1 or more (a restart resumes from one)"
if [ -z "$KILL_AT" ]; then  # railyard bench recover's default: half way, between two checkpoints
  KILL_AT=$((STEPS / 2 + CKPT_EVERY / 2))
  [ "$KILL_AT" -ge 1 ] || KILL_AT=1
  [ "$KILL_AT" -le $((STEPS - 1)) ] || KILL_AT=$((STEPS - 1))
fi
[ "$KILL_AT" -ge 1 ] && [ "$KILL_AT" -lt "$STEPS" ] ||
  die "--kill-at-step $KILL_AT: expected 1 to $((STEPS - 1)) (before the last of --steps $STEPS)"
[ "$TIMEOUT_S" -ge 10 ] || die "--timeout-s $TIMEOUT_S: expected 10 or more"
for tool in timeout setsid; do command -v "$tool" >/dev/null || die "$tool not found (coreutils, util-linux)"; done
[ -x "$PY" ] || die "$PY not found: Debian's python3 (with python3-torch) is what this uses"
[ -x "$TORCHRUN" ] || die "$TORCHRUN not found: install python3-torch (Debian 12: torch 1.13)"
"$PY" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
  die "$PY cannot import torch with gloo (python3-torch)"
[ -f "$SCRIPT" ] || die "$SCRIPT not found"
if [ "$RAILYARD_ON" = 1 ]; then
  [ -x "$RAILYARD" ] || die "$RAILYARD is not an executable; build it (make build), give --railyard PATH, or --no-railyard"
  [ -x "$TRAIN" ] || die "$TRAIN is not an executable; build it (cmake --build build --target railyard_train_example) or give --train-binary PATH"
fi
"$PY" -c 'import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("", 29400))' 2>/dev/null ||
  die "port 29400 is in use: torchrun --standalone serves its rendezvous there; stop what holds it"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/compare-recover.XXXXXX")
mkdir "$TMP/sessions"  # one empty file per session still running, named by its process group
# Signals the process groups of the sessions still running (this script's own, nothing else).
signal_sessions() {
  local f ok=1
  for f in "$TMP"/sessions/*; do
    [ -e "$f" ] || continue
    kill "-$1" -- "-${f##*/}" 2>/dev/null && ok=0
  done
  return $ok  # 0 when some group was still there
}
# Ends what is left: SIGTERM (railyard bench recover then stops its job, torchrun its
# workers), up to 20 s for them to go, then SIGKILL.
cleanup() {
  local rc=$? i
  set +e
  trap - INT TERM
  signal_sessions TERM
  for ((i = 0; i < 100; i++)); do signal_sessions 0 || break; sleep 0.2; done
  signal_sessions KILL
  wait 2>/dev/null  # the pipelines that read from them
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "compare_recover.sh: interrupted; stopping its runs" >&2; exit 130' INT
trap 'echo "compare_recover.sh: terminated; stopping its runs" >&2; exit 143' TERM

# Each line read, prefixed with the time it was read (CLOCK_REALTIME, s.us).
stamp() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done
}

# watch_session PID DIR: PID is a command started with setsid (so it leads its own process
# group); waits for it, writes its exit status to DIR/rc, and kills whatever of its group is
# left (no process of the group can have been reused while one is alive).
watch_session() {
  local pg=$1 rc=0
  : >"$TMP/sessions/$pg"
  wait "$pg" || rc=$?
  kill -KILL -- "-$pg" 2>/dev/null || true
  rm -f "$TMP/sessions/$pg"
  echo "$rc" >"$2/rc"
}

# run_torch NAME INTERVAL KILL(0|1): one torchrun job into $TMP/NAME (events.jsonl,
# agent.log, rc, wall).
run_torch() {
  local name=$1 interval=$2 kill=$3 d="$TMP/$1" restarts=0 t0 t1
  local -a fault=()
  mkdir -p "$d/tmp"
  if [ "$kill" = 1 ]; then
    restarts=1
    fault=(--kill-rank "$KILL_RANK" --kill-at-step "$KILL_AT")
  fi
  t0=$EPOCHREALTIME
  {
    # setsid: its own session and process group (timeout's), workers included, so that
    # cleanup can end whatever is left of it.
    setsid env TMPDIR="$d/tmp" LOGLEVEL=INFO GLOO_SOCKET_IFNAME=lo PYTHONDONTWRITEBYTECODE=1 \
      timeout -k 5 "$TIMEOUT_S" "$TORCHRUN" --standalone --nnodes=1 --nproc_per_node=4 \
      --max_restarts="$restarts" --monitor_interval="$interval" --redirects=9:0 --tee=9:0 \
      --log_dir="$d/logs" "$SCRIPT" --steps "$STEPS" --ckpt-every "$CKPT_EVERY" \
      --ckpt-dir "$d/ckpt" --events "$d/events.jsonl" "${fault[@]}" </dev/null 2>&1 &
    watch_session $! "$d"
  } | stamp >"$d/agent.log" &
  wait $!  # in the background, so that SIGINT or SIGTERM is acted on at once
  t1=$EPOCHREALTIME
  echo "$t0 $t1" >"$d/wall"
}

# run_railyard NAME: one `railyard bench recover --repeat 1 --json` into $TMP/NAME.
run_railyard() {
  local d="$TMP/$1" t0 t1
  mkdir -p "$d/tmp"
  t0=$EPOCHREALTIME
  setsid env TMPDIR="$d/tmp" timeout -k 10 "$TIMEOUT_S" "$RAILYARD" bench recover \
    --hosts local:3 --spares 1 --nproc-per-host 2 --steps "$STEPS" --ckpt-every "$CKPT_EVERY" \
    --kill-rank "$KILL_RANK" --kill-at-step "$KILL_AT" --fault kill --repeat 1 --json \
    --train-binary "$TRAIN" </dev/null >"$d/out.json" 2>"$d/err" &
  watch_session $! "$d"
  t1=$EPOCHREALTIME
  echo "$t0 $t1" >"$d/wall"
}

# The analysis: per run one JSON line of figures into results.jsonl; then the tables.
cat >"$TMP/analyze.py" <<'PY'
import json, sys

def lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []

def wall_s(d):
    t0, t1 = open(d + "/wall").read().split()
    return float(t1) - float(t0)

def tail(path, n=400):
    text = "\n".join(lines(path))
    return text[-n:]

def torch_run(d, kill_rank, ref_hash):
    """Figures of one torchrun job from its events and its stamped log."""
    ev = [json.loads(l) for l in lines(d + "/events.jsonl") if l.startswith("{")]
    log = []
    for l in lines(d + "/agent.log"):
        ts, _, text = l.partition(" ")
        log.append((int(round(float(ts) * 1e9)), text))
    rc = int(open(d + "/rc").read())
    out = {"rc": rc, "run_s": wall_s(d), "problems": []}
    problems = out["problems"]
    attempts = sorted({e["attempt"] for e in ev})
    ends = [e for e in ev if e["ev"] == "end"]
    hashes = {e["hash"] for e in ends}
    out["hash"] = ends[0]["hash"] if len(hashes) == 1 and len(ends) == 4 else None
    if rc != 0:
        problems.append(f"torchrun exited {rc}")
    if len(ends) != 4 or len(hashes) != 1:
        problems.append(f"{len(ends)} ranks ended, hashes {sorted(hashes)}")
    if ref_hash is not None and out["hash"] != ref_hash:
        problems.append(f"final hash {out['hash']} differs from the reference {ref_hash}")
    if ref_hash is None:  # the reference run
        if attempts != [0]:
            problems.append(f"attempts {attempts}, expected one")
        out["correct"] = not problems
        return out
    if attempts != [0, 1]:
        problems.append(f"attempts {attempts}, expected 0 and 1 (one restart)")
    kill = [e for e in ev if e["ev"] == "kill" and e["attempt"] == 0]
    a1 = [e for e in ev if e["attempt"] == 1]
    def all_at(kind, evs):  # when the last rank got to `kind`, or None
        ts = [e["t_ns"] for e in evs if e["ev"] == kind]
        return max(ts) if len(ts) == 4 else None
    def first_line(after, *needles):
        for t, text in log:
            if t >= after and any(n in text for n in needles):
                return t
        return None
    if not kill:
        problems.append("no kill event")
        out["correct"] = False
        return out
    death = kill[0]["t_ns"]
    detected = first_line(death, "closing signal SIGTERM", "failed (exitcode")
    stopped = first_line(death, "failed (exitcode")
    peer_ends = []
    for r in range(4):
        if r == kill_rank:
            continue
        mine = [e["t_ns"] for e in ev if e["attempt"] == 0 and e["rank"] == r
                and e["ev"] in ("sigterm", "exit")]
        peer_ends.append(min(mine) if mine else None)
    started, stepped = all_at("start", a1), all_at("first_step", a1)
    if None in (detected, stopped, started, stepped):
        problems.append("the agent's log or the new ranks' events miss a phase")
        out["correct"] = False
        return out
    ms = lambda a, b: (b - a) / 1e6 if a is not None and b is not None else None
    rdzv = first_line(stopped, "Rendezvous'ing worker group")
    spawn = first_line(rdzv or stopped, "Starting worker group")
    last0 = max([e.get("last_step", 0) for e in ev if e["attempt"] == 0
                 and e["ev"] in ("kill", "sigterm", "exit")] or [0])
    resumed = {e["from_step"] for e in a1 if e["ev"] == "resumed"}
    if len(resumed) != 1:
        problems.append(f"the new ranks resumed from {sorted(resumed)}")
    frm = min(resumed) if resumed else 0
    out.update({
        "detect_ms": ms(death, detected),
        "stop_ms": ms(detected, stopped),
        "restart_ms": ms(stopped, started),
        "resume_ms": ms(started, stepped),
        "total_ms": ms(death, stepped),
        "lost_steps": last0 + 1 - frm,
        "resumed_from": frm,
        "breakdown": {
            "peers_end_ms": ms(death, max(peer_ends)) if None not in peer_ends else None,
            "agent_stop_ms": ms(stopped, rdzv),      # "failed" -> "Rendezvous'ing"
            "rendezvous_ms": ms(rdzv, spawn),        # -> "Starting worker group"
            "spawn_ms": ms(spawn, started),          # -> every interpreter running our code
            "import_ms": ms(started, all_at("imported", a1)),
            "init_pg_ms": ms(all_at("imported", a1), all_at("init", a1)),
            "load_ddp_ms": ms(all_at("init", a1), all_at("resumed", a1)),
            "first_step_ms": ms(all_at("resumed", a1), stepped),
        },
    })
    out["det_stop_ms"] = out["detect_ms"] + out["stop_ms"]
    out["correct"] = not problems
    return out

def railyard_run(d):
    rc = int(open(d + "/rc").read())
    out = {"rc": rc, "run_s": wall_s(d), "problems": []}
    try:
        j = json.loads(lines(d + "/out.json")[-1])
        r = j["runs"][0]
    except (IndexError, ValueError, KeyError):
        out["problems"].append(f"railyard exited {rc} without its JSON: {tail(d + '/err')}")
        out["correct"] = False
        return out
    for k in ("detect_ms", "stop_ms", "restart_ms", "resume_ms", "total_ms", "lost_steps",
              "run_s", "resumed_from", "blamed_rank", "weights_identical"):
        out[k] = r.get(k)
    out["det_stop_ms"] = r["detect_ms"] + r["stop_ms"]
    out["uninterrupted_s"] = j.get("uninterrupted_s")
    out["bench_s"] = wall_s(d)  # its reference run and this one
    if not r.get("correct") or rc != 0:
        out["problems"].append(f"railyard: not correct (exit {rc}): {r.get('cause')}")
    out["correct"] = not out["problems"]
    return out

def median(v):  # as railyard bench recover: the upper of the two middle values
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None

def fmt(x, w, p=0):
    return f"{'-':>{w}}" if x is None else f"{x:>{w}.{p}f}"

def report(results_path, json_out, header):
    rows = [json.loads(l) for l in lines(results_path)]
    ref = next(r for r in rows if r["system"] == "reference")
    rows = [r for r in rows if r["system"] != "reference"]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    print(header)
    print(f"torch reference (uninterrupted torchrun, monitor {ref['interval']} s): "
          f"{ref['run_s']:.2f} s, final hash {ref['hash']}")
    cols = ["detect_ms", "stop_ms", "det_stop_ms", "restart_ms", "resume_ms", "total_ms"]
    head = (f"{'rep':<7}{'system':<34}{'detect':>8}{'stop':>7}{'det+stop':>10}{'restart':>9}"
            f"{'resume':>8}{'total':>8}{'lost':>6}{'run_s':>7}  correct")
    def line(rep, label, r, ok=None):
        vals = "".join(fmt(r.get(c), w) for c, w in zip(cols, (8, 7, 10, 9, 8, 8)))
        if ok is None:
            ok = "yes" if r.get("correct") else "NO: " + "; ".join(r.get("problems", []))[:120]
        print(f"{rep:<7}{label:<34}{vals}{fmt(r.get('lost_steps'), 6)}"
              f"{fmt(r.get('run_s'), 7, 2)}  {ok}")
    print("\nrecovery after rank 1 is SIGKILLed (ms; medians over the correct runs)")
    print(head)
    medians = {}
    for r in rows:
        line(str(r["rep"]), r["label"], r)
    for label in labels:
        good = [r for r in rows if r["label"] == label and r.get("correct")]
        m = {c: median([r.get(c) for r in good]) for c in cols + ["lost_steps", "run_s"]}
        n = len([r for r in rows if r["label"] == label])
        m["correct_runs"], m["runs"] = len(good), n
        medians[label] = m
        line("median", label, m, f"{len(good)} of {n} correct")
    ry = next((l for l in labels if l.startswith("railyard")), None)
    if ry and medians[ry]["total_ms"]:
        for label in labels:
            if label == ry or medians[label]["total_ms"] is None:
                continue
            ratio = medians[label]["total_ms"] / medians[ry]["total_ms"]
            print(f"total, {label} / {ry}: {ratio:.1f}x (ratio of the medians)")
    torch_rows = [r for r in rows if r["system"] == "torchrun" and "breakdown" in r]
    if torch_rows:
        bk = ["peers_end_ms", "agent_stop_ms", "rendezvous_ms", "spawn_ms", "import_ms",
              "init_pg_ms", "load_ddp_ms", "first_step_ms"]
        print("\ntorchrun's phases (ms): peers_end = death -> the last survivor's own end; "
              "then, from the agent's \"failed\" line: agent_stop -> \"Rendezvous'ing\", "
              "rendezvous -> \"Starting worker group\", spawn -> every `start` event, "
              "import torch, init_process_group, load + DDP, first step")
        print(f"{'rep':<7}{'system':<34}" + "".join(f"{c[:-3]:>12}" for c in bk))
        for r in torch_rows:
            print(f"{r['rep']:<7}{r['label']:<34}" +
                  "".join(fmt(r["breakdown"].get(c), 12) for c in bk))
        for label in dict.fromkeys(r["label"] for r in torch_rows):
            good = [r for r in torch_rows if r["label"] == label and r.get("correct")]
            print(f"{'median':<7}{label:<34}" +
                  "".join(fmt(median([r["breakdown"].get(c) for r in good]), 12) for c in bk))
    ry_rows = [r for r in rows if r["system"] == "railyard" and r.get("uninterrupted_s")]
    if ry_rows:
        print(f"railyard uninterrupted run (median of each bench's reference): "
              f"{median([r['uninterrupted_s'] for r in ry_rows]):.2f} s")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"reference": ref, "runs": rows, "median": medians}, f, indent=1)
    bad = [r for r in rows if not r.get("correct")] + ([ref] if not ref.get("correct") else [])
    return 1 if bad else 0

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "torch":  # DIR KILL_RANK REF_HASH|- LABEL REP INTERVAL
        d, kill_rank, ref, label, rep, interval = sys.argv[2:8]
        r = torch_run(d, int(kill_rank), None if ref == "-" else ref)
        r.update(system="torchrun" if ref != "-" else "reference", label=label, rep=rep,
                 interval=float(interval))
        print(json.dumps(r))
    elif cmd == "railyard":  # DIR LABEL REP
        r = railyard_run(sys.argv[2])
        r.update(system="railyard", label=sys.argv[3], rep=sys.argv[4])
        print(json.dumps(r))
    elif cmd == "report":  # RESULTS JSON_OUT|- HEADER
        sys.exit(report(sys.argv[2], None if sys.argv[3] == "-" else sys.argv[3], sys.argv[4]))
PY
analyze() { "$PY" "$TMP/analyze.py" "$@"; }
RESULTS="$TMP/results.jsonl"
: >"$RESULTS"

say() { echo "compare_recover.sh: $*" >&2; }
say "the torch reference: torchrun, no fault, $STEPS steps (monitor interval $MONITOR s)"
run_torch reference "$MONITOR" 0
analyze torch "$TMP/reference" "$KILL_RANK" - "torch reference" 0 "$MONITOR" >>"$RESULTS"
REF_HASH=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["hash"] or "")' "$RESULTS")
if [ -z "$REF_HASH" ]; then
  say "the uninterrupted torchrun run failed (exit $(cat "$TMP/reference/rc")); its output ends:"
  tail -n 30 "$TMP/reference/agent.log" >&2
  exit 1
fi

DEFAULT_LABEL="torchrun, monitor ${MONITOR} s"
[ "$MONITOR" = 5 ] && DEFAULT_LABEL="torchrun, monitor 5 s (default)"
FAST_LABEL="torchrun, monitor ${FAST} s (tuned)"
RY_LABEL="railyard run local:3, 1 spare"
for rep in $(seq 1 "$REPS"); do
  if [ "$RAILYARD_ON" = 1 ]; then
    say "rep $rep/$REPS: railyard bench recover --repeat 1"
    run_railyard "ry-$rep"
    analyze railyard "$TMP/ry-$rep" "$RY_LABEL" "$rep" >>"$RESULTS"
  fi
  say "rep $rep/$REPS: torchrun, --monitor_interval=$MONITOR"
  run_torch "tr-$rep" "$MONITOR" 1
  analyze torch "$TMP/tr-$rep" "$KILL_RANK" "$REF_HASH" "$DEFAULT_LABEL" "$rep" "$MONITOR" >>"$RESULTS"
  if [ -n "$FAST" ]; then
    say "rep $rep/$REPS: torchrun, --monitor_interval=$FAST"
    run_torch "tf-$rep" "$FAST" 1
    analyze torch "$TMP/tf-$rep" "$KILL_RANK" "$REF_HASH" "$FAST_LABEL" "$rep" "$FAST" >>"$RESULTS"
  fi
done

HEADER="world 4 (railyard: local:3, 2 ranks per host, 1 spare; torchrun: --standalone, 4 local
processes), $STEPS steps, a checkpoint every $CKPT_EVERY, rank $KILL_RANK SIGKILLed before step $KILL_AT, $REPS rep(s), $(nproc) cores"
status=0
analyze report "$RESULTS" "${JSON_OUT:--}" "$HEADER" || status=$?
# A failed torch run: show where its log ends, the quickest way to the reason.
for d in "$TMP"/tr-* "$TMP"/tf-*; do
  if [ -f "$d/rc" ] && [ "$(cat "$d/rc")" != 0 ]; then
    say "$(basename "$d") exited $(cat "$d/rc"); its log ends:"
    tail -n 15 "$d/agent.log" >&2
  fi
done
exit "$status"
