#!/usr/bin/python3
"""The torch side of bench/compare_recover.sh: a job of the same shape as examples/train
(a 32-64-1 tanh MLP, 2,177 parameters, data-parallel SGD with momentum, a synthetic
regression task from a seed, a checkpoint every K steps, resumed after a restart), trained
with DistributedDataParallel on the gloo backend (CPU) under torchrun:

  /usr/bin/torchrun --standalone --nnodes=1 --nproc_per_node=4 --max_restarts=1 \\
      --redirects=9:0 --tee=9:0 bench/torchrun_recover.py --steps 100 --ckpt-every 10 \\
      --kill-rank 1 --kill-at-step 55 --ckpt-dir /tmp/c --events /tmp/events.jsonl

(`--redirects=9:0 --tee=9:0` only works around a bug of torch 1.13 under Python 3.11: the
default "0" parses to None and torchrun dies before it starts a worker; the mapping names a
local rank that does not exist, so nothing is redirected.)

On the first attempt (TORCHELASTIC_RESTART_COUNT 0) rank --kill-rank SIGKILLs itself before
step --kill-at-step, once the checkpoint before that step is on disk, as the example
trainer's --fail-at-step-for-test does. Every rank appends JSON lines to --events, one write(2)
per line on an O_APPEND descriptor, each with "ev", "t_ns" (CLOCK_REALTIME in ns: the clock
the compare script stamps torchrun's log lines with), "rank", "attempt" and "pid":

  start       first thing the process does, before torch is imported
  imported    torch imported
  init        init_process_group done (the rendezvous on torchrun's store, gloo's connections)
  resumed     "from_step": the checkpoint step loaded (0: none, starting fresh), and the
              model wrapped in DDP (which broadcasts rank 0's weights)
  first_step  "step": the first step this attempt finished
  kill        "step", "last_step": the kill rank, just before it SIGKILLs itself
  sigterm     "last_step": SIGTERM received (the process exits 143 right after)
  exit        "last_step", "error": an exception ended the process (a survivor whose
              allreduce failed when its peer died)
  end         "last_step", "hash": training finished; hash = sha256 (first 16 hex digits) of
              the final parameters' float32 bytes in parameter order

The run is deterministic: fixed seeds, one thread, torch.use_deterministic_algorithms, data
drawn from a generator keyed by (seed, step, rank), and one throw-away backward at every
start so that every real step runs on DDP's rebuilt gradient bucket (see train()), so a
run that was killed and resumed ends with the same weights as one that never failed (the
compare script checks the hash).
Checkpoints: rank 0 writes <ckpt-dir>/ckpt.pt (step, model, optimizer) to a temporary file,
fsyncs it and renames it over the old one, then <ckpt-dir>/ckpt.step the same way; a
restarted process loads ckpt.pt when it is there, whatever its restart count.
"""
# Only the standard library before the "start" event: its time should be the process's
# start, not torch's import (about a second on a small machine).
import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--steps", type=int, default=100, help="total steps (default 100)")
parser.add_argument("--ckpt-every", type=int, default=10, help="0: no checkpoints (default 10)")
parser.add_argument("--ckpt-dir", required=True, help="where ckpt.pt and ckpt.step go")
parser.add_argument("--kill-rank", type=int, default=-1, help="the rank that dies (-1: none)")
parser.add_argument("--kill-at-step", type=int, default=-1, help="it dies before this step")
parser.add_argument("--events", required=True, help="JSON-lines file every rank appends to")
parser.add_argument("--batch", type=int, default=16, help="samples per rank per step")
parser.add_argument("--seed", type=int, default=1234)
args = parser.parse_args()

RANK = int(os.environ.get("RANK", "0"))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
EVENTS_FD = os.open(args.events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
last_step = 0  # the last step this process finished; read by the SIGTERM thread


def record(ev, **fields):
    """Appends one event line; the time is taken first, so encoding is not part of it."""
    t_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)
    line = {"ev": ev, "t_ns": t_ns, "rank": RANK, "attempt": ATTEMPT, "pid": os.getpid()}
    line.update(fields)
    os.write(EVENTS_FD, (json.dumps(line) + "\n").encode())


record("start")

# SIGTERM (torchrun's agent stopping the group) is taken by a thread in sigwait, not by a
# Python signal handler: a handler runs only when the main thread is back in the
# interpreter, and a survivor may sit in a gloo call. The signal is blocked here, before
# torch starts any thread, so that every thread inherits the block and only sigwait sees it.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def watch_sigterm():
    signal.sigwait({signal.SIGTERM})
    record("sigterm", last_step=last_step)
    os._exit(128 + signal.SIGTERM)


threading.Thread(target=watch_sigterm, name="sigterm", daemon=True).start()

import torch  # noqa: E402  (after the start event on purpose)
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

record("imported")

INPUTS, HIDDEN = 32, 64  # examples/train's shape: 32 * 64 + 64 + 64 + 1 = 2,177 parameters


def make_mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
    )


def batch_for(teacher, step, rank):
    """The step's samples for this rank: a pure function of (seed, step, rank), so nothing
    about the data needs saving, and a resumed step sees what the first try saw."""
    g = torch.Generator().manual_seed((args.seed * 1_000_003 + step) * 1_009 + rank)
    x = torch.rand(args.batch, INPUTS, generator=g) * 2 - 1
    with torch.no_grad():
        y = teacher(x) + 0.02 * (torch.rand(args.batch, 1, generator=g) * 2 - 1)
    return x, y


def atomic_write(path, write):
    """write(f) into path + ".tmp", fsync, rename over path, fsync the directory."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def committed_step(ckpt_dir):
    try:
        with open(os.path.join(ckpt_dir, "ckpt.step")) as f:
            return int(f.read())
    except (OSError, ValueError):
        return -1


def params_hash(module):
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def train():
    global last_step
    torch.set_num_threads(1)  # torchrun sets OMP_NUM_THREADS=1 as well; the trainer uses one
    torch.use_deterministic_algorithms(True)
    # init_method env://: MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE come from torchrun.
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    record("init", world=world)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    ckpt = os.path.join(args.ckpt_dir, "ckpt.pt")

    model = make_mlp(args.seed)
    teacher = make_mlp(args.seed + 1)  # the fixed "teacher" network the data comes from
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if os.path.exists(ckpt):  # a restart: every rank loads the same file
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = state["step"]
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's weights (equal anyway)
    record("resumed", from_step=start)

    loss_fn = torch.nn.MSELoss()
    # DDP lays its gradient bucket out in parameter order for the first backward and
    # rebuilds it, at the next forward, in the order the gradients became ready. Gloo's
    # allreduce sums each element in an order that depends on where it lies in the bucket,
    # so a resumed run whose first step ran on the first layout would round differently
    # from the uninterrupted run's same step (measured: the final weights differ). One
    # backward on zeros at every start, before any real step, puts every real step of
    # every run on the rebuilt layout; its gradients are thrown away.
    loss_fn(ddp(torch.zeros(args.batch, INPUTS)), torch.zeros(args.batch, 1)).backward()
    opt.zero_grad()

    for step in range(start + 1, args.steps + 1):
        if step == args.kill_at_step and RANK == args.kill_rank and ATTEMPT == 0:
            # Die once the checkpoint a restart resumes from is committed (the example
            # trainer waits for its save in flight the same way), so both resume from the
            # same step. Rank 0 writes it synchronously, so this wait is short or nothing.
            want = (step - 1) // args.ckpt_every * args.ckpt_every if args.ckpt_every else 0
            deadline = time.monotonic() + 60
            while want > 0 and committed_step(args.ckpt_dir) < want:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"checkpoint of step {want} not committed after 60 s")
                time.sleep(0.001)
            record("kill", step=step, last_step=last_step)
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch_for(teacher, step, RANK)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()  # DDP averages the gradients over the ranks (one gloo allreduce)
        opt.step()
        last_step = step
        if step == start + 1:
            record("first_step", step=step)
        if RANK == 0 and args.ckpt_every > 0 and step % args.ckpt_every == 0:
            state = {"step": step, "model": model.state_dict(), "optim": opt.state_dict()}
            atomic_write(ckpt, lambda f: torch.save(state, f))
            atomic_write(os.path.join(args.ckpt_dir, "ckpt.step"),
                         lambda f: f.write(str(step).encode()))
    record("end", last_step=last_step, hash=params_hash(model))
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        train()
    except BaseException as e:  # noqa: B902  (recorded, then raised again)
        record("exit", last_step=last_step, error=f"{type(e).__name__}: {e}"[:300])
        raise
