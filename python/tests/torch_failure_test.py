"""A rank of a railyard process group that is killed (SIGKILL) or stopped (SIGSTOP) makes
every other rank's next operation raise a RuntimeError that names the operation, the lost
rank and its host, within the group's timeout (plus a margin for a loaded machine; the
measured figure is in docs/performance.md). Gloo names only a peer address, and waits out
its whole timeout for a stopped rank."""

import multiprocessing
import os
import signal

import pytest

pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

from ranks import run_ranks  # noqa: E402
import torch_ranks  # noqa: E402

WORLD = 3
VICTIM = 1
TIMEOUT_S = 4.0
# The bound asserted: the timeout plus slack for 3 ranks on 2 loaded cores. A hang would
# blow far past it; the tight figure (timeout + 1 s) is measured by the benchmark.
BOUND_S = TIMEOUT_S + 8.0


def lose_a_rank(how):
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    port = torch_ranks.free_port()
    procs = [ctx.Process(target=torch_ranks.survive_a_lost_rank,
                         args=(r, WORLD, port, TIMEOUT_S, VICTIM, ready, go, results))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    try:
        hosts = dict(ready.get(timeout=60) for _ in range(WORLD))
        victim = procs[VICTIM]
        os.kill(victim.pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        if how == "kill":
            victim.join(30)
        go.set()
        got = [results.get(timeout=60) for _ in range(WORLD - 1)]
        for p in procs:
            if p is not victim:
                p.join(30)
                assert p.exitcode == 0, f"a surviving rank exited {p.exitcode}"
        return hosts, got
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                os.kill(p.pid, signal.SIGCONT)
                p.join(30)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_every_survivor_names_the_operation_the_rank_and_its_host(how):
    hosts, got = lose_a_rank(how)
    assert sorted(rank for rank, _, _ in got) == [r for r in range(WORLD) if r != VICTIM]
    for rank, message, seconds in got:
        assert message, f"rank {rank}: allreduce succeeded without rank {VICTIM}"
        assert "allreduce" in message, f"rank {rank}: the operation is not named: {message}"
        assert f"rank {VICTIM}" in message, f"rank {rank}: rank {VICTIM} is not named: {message}"
        assert hosts[VICTIM] in message, f"rank {rank}: host {hosts[VICTIM]} not named: {message}"
        assert seconds < BOUND_S, f"rank {rank} raised after {seconds:.1f} s: {message}"



def test_a_finished_operations_tensors_are_released_on_a_callers_thread():
    # A script that dies of a collective's error ends its interpreter the moment wait()
    # returns; the worker releasing that operation's tensors then aborted the process
    # (SIGABRT) in about 4 of 10 such exits. torch_ranks says why; this checks the cause.
    dropped = multiprocessing.get_context("spawn").Event()
    run_ranks(torch_ranks.release_on_the_callers_thread, 2, torch_ranks.free_port(), dropped)
