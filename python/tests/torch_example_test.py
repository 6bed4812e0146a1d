"""examples/torch_ddp.py under `railyard run`: DDP on the railyard backend with checkpoints
through railyard.torch. A rank killed mid-run is named, its host's ranks restart on the spare
from the newest checkpoint, and the final weights are bit-identical to an uninterrupted run
on the same world size."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

RAILYARD = os.environ["RAILYARD_BINARY"]
EXAMPLE = os.path.join(os.environ["RAILYARD_SOURCE_DIR"], "examples", "torch_ddp.py")
STEPS = 24


def run(tmp, name, hosts, spares, *extra):
    ckpt = tmp / f"{name}-ckpt"
    out = tmp / f"{name}.pt"
    events = tmp / f"{name}-events.jsonl"
    cmd = [RAILYARD, "run", "--hosts", f"local:{hosts}", "--spares", str(spares),
           "--nproc-per-host", "2", "--ckpt-dir", str(ckpt), "--events", str(events),
           "--max-restarts", "2", "--env", f"PYTHONPATH={os.environ['PYTHONPATH']}", "--",
           sys.executable, EXAMPLE, "--steps", str(STEPS), "--ckpt-every", "5", "--hidden", "64",
           "--timeout", "10", "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"railyard run exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    log = [json.loads(line) for line in events.read_text().splitlines()]
    return torch.load(out), log, proc


def test_a_killed_rank_resumes_on_the_spare_with_identical_weights(tmp_path):
    reference, _, _ = run(tmp_path, "reference", 2, 0)
    got, log, proc = run(tmp_path, "killed", 3, 1, "--fail-at-step-for-test", "12",
                         "--fail-rank-for-test", "1")
    failures = [e for e in log if e["event"] == "failure"]
    restarts = [e for e in log if e["event"] == "restart"]
    assert len(failures) == 1 and failures[0]["rank"] == 1, failures
    assert "SIGKILL" in failures[0]["message"], failures[0]
    assert len(restarts) == 1 and restarts[0]["host"] == "local2", restarts
    assert restarts[0]["step"] == 10, restarts[0]  # the newest committed checkpoint
    assert "succeeded after 1 restart" in proc.stdout, proc.stdout
    assert sorted(got) == sorted(reference)
    for name, tensor in reference.items():
        assert torch.equal(got[name], tensor), f"{name} differs from the uninterrupted run"
