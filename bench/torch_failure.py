#!/usr/bin/python3
"""What a surviving rank of a torch.distributed job is told, and when, after a peer is
killed (SIGKILL) or stopped (SIGSTOP): the railyard backend beside gloo, the same job, the
same timeout, in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_failure.py [--world 3] [--timeout 10]
                                                                    [--reps 3] [--json FILE]

Each repetition and backend: WORLD ranks on loopback join through env:// with
init_process_group(backend, timeout=TIMEOUT), allreduce 256 KiB once, then the parent kills
or stops rank 1 and the others allreduce again. Per backend and fault it prints the median
seconds from the allreduce's start to its exception on the survivors, and the first
survivor's message. A survivor that gets no exception within TIMEOUT + 30 s counts as hung
(the table says so; the stopped rank is then killed, which unblocks it).
"""

import argparse
import datetime
import json
import multiprocessing
import os
import signal
import socket
import statistics
import sys
import time

VICTIM = 1


def rank_main(rank, world, port, backend, timeout_s, ready, go, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist

    if backend == "railyard":
        import railyard.torch  # noqa: F401
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    ready.put(rank)
    if rank == VICTIM:
        signal.pause()
    go.wait(120)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        results.put((rank, time.monotonic() - start, "no error"))
    except RuntimeError as e:
        results.put((rank, time.monotonic() - start, str(e).strip().splitlines()[0][:300]))
    results.close()
    results.join_thread()  # the queue's feeder thread has sent it: os._exit would drop it
    os._exit(0)  # gloo's group cannot be torn down after a lost peer without waiting again


def one(backend, how, world, timeout_s):
    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=rank_main,
                         args=(r, world, port, backend, timeout_s, ready, go, results))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        for _ in range(world):
            ready.get(timeout=120)
        os.kill(procs[VICTIM].pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        go.set()
        got = []
        for _ in range(world - 1):
            try:
                got.append(results.get(timeout=timeout_s + 30))
            except Exception:  # queue.Empty: hung past the bound
                got.append((-1, float("inf"), f"no exception within {timeout_s + 30:.0f} s"))
        return got
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                os.kill(p.pid, signal.SIGCONT)
            p.join(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=10.0, help="the process group's timeout (s)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default="", help="also write the rows here")
    args = ap.parse_args()
    rows = []
    for how in ("kill", "stop"):
        for backend in ("railyard", "gloo"):
            times, message = [], ""
            for _ in range(args.reps):
                got = one(backend, how, args.world, args.timeout)
                times += [t for _, t, _ in got]
                message = message or got[0][2]
            rows.append({"fault": how, "backend": backend, "median_s": statistics.median(times),
                         "max_s": max(times), "message": message})
            print(f"{how:4} {backend:8} median {rows[-1]['median_s']:.2f} s  max "
                  f"{rows[-1]['max_s']:.2f} s  {message}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"world": args.world, "timeout_s": args.timeout, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
