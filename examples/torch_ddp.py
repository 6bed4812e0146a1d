#!/usr/bin/python3
"""A small model trained with DistributedDataParallel on the railyard backend, checkpointed
through railyard.torch, and brought back by `railyard run` when a rank dies.

    railyard run --hosts local:3 --spares 1 --nproc-per-host 2 --ckpt-dir /tmp/c -- \\
        /usr/bin/python3 examples/torch_ddp.py --steps 40 --out /tmp/w.pt

Everything that decides the result is a function of the step and the rank: the batches come
from a generator seeded by (step, rank), and a restart loads the model, the optimizer and the
step from the newest checkpoint that verifies. So after any number of restarts onto the same
world size the final weights are bit-identical to an uninterrupted run's (the ranks and their
ring order are the same; torch's CPU kernels are deterministic for this model).

Outside a launcher it runs as one process (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
default to a world of one on loopback). PYTHONPATH must reach the package railyard
(build/python in the build tree).
"""

import argparse
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import railyard.checkpoint
import railyard.progress
import railyard.torch


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Checkpoints go to --ckpt-dir, else RAILYARD_CKPT_DIR (set by railyard run).\n"
               "Example, 4 ranks on two pretend hosts and a spare, rank 1 killed after step 12:\n"
               "  railyard run --hosts local:3 --spares 1 --nproc-per-host 2 --ckpt-dir /tmp/c \\\n"
               "    --env PYTHONPATH=build/python -- /usr/bin/python3 examples/torch_ddp.py \\\n"
               "    --steps 24 --fail-at-step-for-test 12 --fail-rank-for-test 1 --out /tmp/w.pt\n"
               "Docs: docs/torch.md",
    )
    p.add_argument("--steps", type=int, default=40, help="optimizer steps in all (default 40)")
    p.add_argument("--ckpt-every", type=int, default=5, help="steps between checkpoints")
    p.add_argument("--ckpt-dir", default=os.environ.get("RAILYARD_CKPT_DIR", ""),
                   help="checkpoint directory (default RAILYARD_CKPT_DIR; none: no checkpoints)")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--hidden", type=int, default=256, help="width of the hidden layers")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds any collective may take before it fails naming the rank")
    p.add_argument("--out", default="", help="rank 0 writes the final state_dict here")
    p.add_argument("--fail-at-step-for-test", type=int, default=-1,
                   help="the rank of --fail-rank-for-test kills itself (SIGKILL) after this "
                        "step, in the first attempt only (TORCHELASTIC_RESTART_COUNT 0)")
    p.add_argument("--fail-rank-for-test", type=int, default=0,
                   help="the rank that kills itself (default 0)")
    return p.parse_args()


def model(hidden):
    torch.manual_seed(0)  # the same initial weights on every rank
    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden), torch.nn.GELU(),
        torch.nn.Linear(hidden, 8),
    )


def batch(step, rank, size):
    """The batch of `rank` at `step`: the same whatever happened before it."""
    g = torch.Generator().manual_seed(step * 100_003 + rank)
    x = torch.randn(size, 64, generator=g)
    return x, torch.sin(x[:, :8] * 3.0) + 0.1 * torch.randn(size, 8, generator=g)


def main():
    args = parse_args()
    for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                          ("MASTER_PORT", "29512")):
        os.environ.setdefault(name, default)
    dist.init_process_group("railyard", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    net = model(args.hidden)
    ddp = DistributedDataParallel(net)
    opt = torch.optim.Adam(ddp.parameters(), lr=3e-3)
    start = 0
    if args.ckpt_dir and any(s.state == "committed" for s in railyard.checkpoint.list(args.ckpt_dir)):
        state = railyard.torch.load(args.ckpt_dir, {"model": net, "optimizer": opt})
        start = state["step"]
        if rank == 0:
            print(f"resumed from step {start} (restart {restart})", flush=True)

    loss = torch.zeros(())
    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank, args.batch)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        railyard.progress.step(step)
        if args.ckpt_dir and step % args.ckpt_every == 0:
            # Asynchronous: the tensors are copied before it returns, written while training
            # goes on; the next save (or the wait below) collects its result.
            railyard.torch.save({"model": net, "optimizer": opt, "step": step}, args.ckpt_dir,
                                step, asynchronous=True)
        if (step == args.fail_at_step_for_test and rank == args.fail_rank_for_test
                and restart == 0):
            railyard.torch.wait()  # the step's checkpoint is committed: resume from it
            print(f"rank {rank}: killing myself after step {step} (--fail-at-step-for-test)",
                  file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    if args.ckpt_dir:
        railyard.torch.wait()
    if rank == 0:
        print(f"step {args.steps}: loss {loss.item():.6f} on {world} ranks", flush=True)
        if args.out:
            torch.save(net.state_dict(), args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
