"""Ranks as real processes for the multi-rank tests: run_ranks starts one spawned process per
rank and waits for all of them with a deadline; the functions below are what the ranks run
(module-level, so that the spawn start method can import them)."""

import multiprocessing
import os
import sys
import time

import numpy as np

# A whole multi-rank case, start-up of every rank included, stays well inside ctest's timeout.
RANK_TIMEOUT = 60.0


def start_ranks(target, world_size, *args):
    """Starts target(rank, world_size, *args) in world_size spawned processes."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(r, world_size, *args)) for r in range(world_size)]
    for p in procs:
        p.start()
    return procs


def join_ranks(procs, timeout=RANK_TIMEOUT):
    """Waits for every rank until the deadline; fails naming the ranks that did not exit 0
    by then (they are killed) or exited otherwise."""
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
        procs[r].join()
    assert not hung, f"ranks {hung} of {len(procs)} still ran after {timeout} s (killed)"
    failed = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != 0}
    assert not failed, f"ranks exited non-zero (rank: exit code): {failed}"


def run_ranks(target, world_size, *args, timeout=RANK_TIMEOUT):
    """Runs target(rank, world_size, *args) in world_size spawned processes, bounded by
    `timeout` (join_ranks)."""
    join_ranks(start_ranks(target, world_size, *args), timeout)


def global_tensor(name, shape, dtype=np.float32):
    """The same values on every rank and in the parent: element i of tensor `name` is a
    function of (name, i) only."""
    n = int(np.prod(shape))
    seed = sum(name.encode()) * 1000003
    return ((np.arange(n, dtype=np.float64) * 7.25 + seed) % 1000.0).astype(dtype).reshape(shape)


def row_block(rows, rank, world_size):
    """Rows [start, stop) of rank `rank` when `rows` are split as evenly as possible."""
    start = rows * rank // world_size
    return start, rows * (rank + 1) // world_size


SHAPE = (10, 6)  # 10 rows split 5/5, 3/3/4, 2/3/2/3 and 10: no split lines up with another


def save_row_shards(rank, world_size, path, step, run_id):
    """Saves this rank's rows of "w" (SHAPE) and the whole of the replicated "bias"."""
    import railyard.checkpoint as ckpt

    w = global_tensor("w", SHAPE)
    start, stop = row_block(SHAPE[0], rank, world_size)
    state = {
        "w": ckpt.Shard(w[start:stop].copy(), (start, 0), SHAPE),
        "bias": global_tensor("bias", (6,)),
    }
    writer = ckpt.Writer(path, rank=rank, world_size=world_size, run_id=run_id,
                         agreement_timeout=30.0)
    writer.save(state, step, {"saved_by": str(world_size)})


def load_row_shards(rank, world_size, path, step):
    """Loads this rank's rows of "w" at this world size and checks them and "bias"."""
    import railyard.checkpoint as ckpt

    start, stop = row_block(SHAPE[0], rank, world_size)
    mine = np.full((stop - start, SHAPE[1]), -1, np.float32)
    bias = np.zeros(6, np.float32)
    ckpt.load(path, {"w": ckpt.Shard(mine, (start, 0), SHAPE), "bias": bias}, step=step)
    np.testing.assert_array_equal(mine, global_tensor("w", SHAPE)[start:stop])
    np.testing.assert_array_equal(bias, global_tensor("bias", (6,)))


def save_with_bad_rank(rank, world_size, path, out_dir):
    """Rank 1 saves a piece that reaches outside its tensor: its save fails, and every rank's
    save raises, nothing committed; the message on rank 0 names rank 1."""
    import railyard
    import railyard.checkpoint as ckpt

    writer = ckpt.Writer(path, rank=rank, world_size=world_size, run_id="bad-rank",
                         agreement_timeout=30.0)
    rows = np.zeros((2, 4), np.float32) if rank == 0 else np.zeros((3, 4), np.float32)
    try:
        writer.save({"w": ckpt.Shard(rows, (2 * rank, 0), (4, 4))}, 1)
    except railyard.Error as e:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as f:
            f.write(f"{type(e).__name__}\n{e}")
        return
    sys.exit(3)  # the save must not succeed


def read_stream(rank, world_size, data_dir, items, state_in, state_out, out_dir):
    """Takes `items` samples as rank `rank` (resuming from the position in `state_in` when
    given), writes their positions and bytes to out_dir, and rank 0 the position after them."""
    import json

    # The reader needs no torch, and importing it would cost each rank about a second:
    # railyard.data then gives its plain Dataset (the parent checks the torch one).
    sys.modules.setdefault("torch", None)
    import railyard.data as data

    ds = data.Dataset(data_dir, rank=rank, world_size=world_size, seed=99, timeout=30.0)
    if state_in:
        with open(state_in) as f:
            ds.load_state_dict(json.load(f))
    taken = [ds.next_samples()[0] for _ in range(items)]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump([[s.position, s.data.hex()] for s in taken], f)
    if rank == 0 and state_out:
        with open(state_out, "w") as f:
            json.dump(ds.state_dict(), f)


def save_then_get_killed(path, run_id):
    """Rank 0 of 2 (the test process is rank 1): saves step 1 with rank 1, then starts step 2,
    which rank 1 never joins, says so on stdout and waits to be killed."""
    import railyard.checkpoint as ckpt

    writer = ckpt.AsyncWriter(path, rank=0, world_size=2, run_id=run_id, agreement_timeout=60.0)
    w1 = global_tensor("w", SHAPE)
    writer.save({"w": ckpt.Shard(w1[:5].copy(), (0, 0), SHAPE)}, 1).wait()
    big = np.ones((8 << 20) // 4, np.float32)  # 8 MiB: the shard is being written or waiting
    writer.save({"w": ckpt.Shard(w1[:5] + 1, (0, 0), SHAPE), "big": big}, 2)
    print("saving 2", flush=True)
    sys.stdin.read()  # until killed (or the test process dies and closes the pipe)
    sys.exit(4)
