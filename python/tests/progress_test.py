"""railyard.progress: a rank process's heartbeats and steps reach the launcher's listener
(launch/progress.h ProgressListener, bound here), and the reporter is a no-op outside the
launcher."""

import os
import socket
import subprocess
import sys
import time

import pytest

import railyard
import railyard.progress as progress

RANK_SCRIPT = """
import railyard.progress as progress
sent = [progress.heartbeat()] + [progress.step(n) for n in range(5)]
r = progress.reporter()
print(r.enabled, r.rank, all(sent))
"""


def run_rank(env, script=RANK_SCRIPT):
    env = {k: v for k, v in env.items() if v is not None}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def base_env(**changes):
    env = dict(os.environ)
    for name in ("RAILYARD_PROGRESS", "RAILYARD_RANK", "RANK"):
        env.pop(name, None)
    env.update(changes)
    return env


def test_heartbeat_and_steps_reach_the_listener(tmp_path):
    listener = progress.Listener(tmp_path / "progress.sock", world_size=2)
    assert listener.path == str(tmp_path / "progress.sock")
    out = run_rank(base_env(RAILYARD_PROGRESS=listener.path, RANK="1"))
    assert out == "True 1 True\n"
    # The rank has exited: its six datagrams are queued on the socket.
    deadline = time.monotonic() + 30
    while listener.received < 6 and time.monotonic() < deadline:
        listener.poll(timeout=deadline - time.monotonic())
    assert listener.received == 6 and listener.malformed == 0
    rank0, rank1 = listener.ranks
    assert not rank0["heard"]
    assert rank1["heard"] and rank1["last_step"] == 4 and len(rank1["step_seconds"]) == 4
    assert listener.poll(timeout=0.0) == 0
    listener.close()
    assert not os.path.exists(tmp_path / "progress.sock")


def test_railyard_rank_wins_and_malformed_datagrams_are_counted(tmp_path):
    listener = progress.Listener(tmp_path / "p.sock", world_size=4)
    run_rank(base_env(RAILYARD_PROGRESS=listener.path, RAILYARD_RANK="3", RANK="0"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"step 9 1 1700000000000000000", listener.path)  # rank outside the world
    deadline = time.monotonic() + 30
    while listener.received + listener.malformed < 7 and time.monotonic() < deadline:
        listener.poll(timeout=deadline - time.monotonic())
    assert listener.ranks[3]["last_step"] == 4 and listener.malformed == 1
    assert "9" in listener.last_malformed


def test_without_a_launcher_reporting_does_nothing():
    assert run_rank(base_env()) == "False -1 True\n"


def test_a_dropped_event_is_false_and_unavailable_from_the_reporter(tmp_path):
    script = (
        "import railyard, railyard.progress as p\n"
        "print(p.step(1), p.heartbeat())\n"
        "try:\n    p.reporter().step(2)\nexcept railyard.UnavailableError as e:\n"
        "    print(isinstance(e, RuntimeError), e.code, str(e).startswith('progress event of rank 0 dropped'))\n"
    )
    out = run_rank(base_env(RAILYARD_PROGRESS=str(tmp_path / "none.sock"), RANK="0"), script)
    assert out == "False False\nTrue UNAVAILABLE True\n"


def test_a_rank_that_is_not_a_number_is_a_value_error(tmp_path):
    script = (
        "import railyard.progress as p\n"
        "try:\n    p.heartbeat()\nexcept ValueError as e:\n    print(\"RANK is 'x'\" in str(e))\n"
    )
    out = run_rank(base_env(RAILYARD_PROGRESS=str(tmp_path / "p.sock"), RANK="x"), script)
    assert out == "True\n"


def test_a_listener_refuses_a_bad_world_size(tmp_path):
    with pytest.raises(ValueError):
        progress.Listener(tmp_path / "p.sock", world_size=0)
    assert issubclass(railyard.UnavailableError, railyard.Error)
