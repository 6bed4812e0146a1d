"""railyard.checkpoint across rank processes: resharding 2 -> 3 and 4 -> 1, a failing rank
that aborts the commit everywhere, and a SIGKILL during a save that leaves the previous step
loadable. Every rank is its own spawned process (ranks.py)."""

import os
import selectors
import signal
import subprocess
import sys

import numpy as np

import railyard.checkpoint as ckpt
import ranks

HERE = os.path.dirname(os.path.abspath(__file__))


def test_reshard_2_ranks_to_3(tmp_path):
    ranks.run_ranks(ranks.save_row_shards, 2, str(tmp_path), 1, "reshard-2")
    c = ckpt.open(tmp_path)
    assert c.world_size == 2 and c.metadata == {"saved_by": "2"}
    ranks.run_ranks(ranks.load_row_shards, 3, str(tmp_path), 1)


def test_reshard_4_ranks_to_1(tmp_path):
    ranks.run_ranks(ranks.save_row_shards, 4, str(tmp_path), 7, "reshard-4")
    # The 4 ranks' pieces of "w", and 4 replicas of "bias", make whole tensors for one reader.
    loaded = ckpt.load(tmp_path, step=7)
    np.testing.assert_array_equal(loaded["w"], ranks.global_tensor("w", ranks.SHAPE))
    np.testing.assert_array_equal(loaded["bias"], ranks.global_tensor("bias", (6,)))
    assert ckpt.open(tmp_path).world_size == 4
    ranks.load_row_shards(0, 1, str(tmp_path), 7)


def test_a_failing_rank_aborts_the_save_on_every_rank(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ranks.run_ranks(ranks.save_with_bad_rank, 2, str(tmp_path / "ckpt"), str(out))
    kind0, message0 = (out / "rank0.err").read_text().split("\n", 1)
    kind1, message1 = (out / "rank1.err").read_text().split("\n", 1)
    assert kind1 == "InvalidArgumentError" and "out of bounds" in message1
    assert kind0 == "AbortedError" and "rank 1" in message0, message0
    assert ckpt.list(tmp_path / "ckpt") == []


def read_line(proc, timeout):
    """The child's next stdout line, or "" when it did not come within `timeout` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline()


def test_sigkill_during_a_save_leaves_the_previous_step_loadable(tmp_path):
    path = str(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, "-c", f"import ranks; ranks.save_then_get_killed({path!r}, 'kill')"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        # This process is rank 1: it saves step 1 with the child, then never joins step 2.
        writer = ckpt.Writer(path, rank=1, world_size=2, run_id="kill", agreement_timeout=30.0)
        w = ranks.global_tensor("w", ranks.SHAPE)
        writer.save({"w": ckpt.Shard(w[5:].copy(), (5, 0), ranks.SHAPE)}, 1)
        line = read_line(child, 30.0)
        assert line == "saving 2\n", f"the child said {line!r}"
        # Step 2 is in flight in the child (its AsyncWriter returned) and cannot commit
        # without rank 1: the kill lands inside the save.
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()

    # Step 2 is not committed (at most an incomplete .tmp-step-00000002 of the dead save).
    steps = ckpt.list(path)
    assert [(s.step, s.state) for s in steps if s.state == "committed"] == [(1, "committed")]
    assert all(s.state == "incomplete" for s in steps if s.step == 2)
    c = ckpt.open(path)
    assert c.step == 1 and c.fallback_notes == []
    np.testing.assert_array_equal(c.load()["w"], w)
    # A new run opens the directory (clearing the dead save's leftovers) and saves step 2.
    ckpt.save({"w": w + 1}, path, 2)
    assert not any(name.startswith(".tmp-") for name in os.listdir(path))
    np.testing.assert_array_equal(ckpt.load(path)["w"], w + 1)
