"""railyard.torch.save/load/wait: a model and its Adam optimizer round-trip bit for bit and
train on identically; a DDP job of 2 and of 3 gloo ranks saves 1/N of the bytes per rank, and
1, 2 or 3 ranks load it (checked against torch.save of the full state on rank 0); ranks with
different trees commit nothing; an asynchronous save is not touched by changes made after it
returned; a corrupt newest step falls back to the previous one; a SIGKILL during a save
leaves the previous step loadable and valid to `railyard ckpt verify`; unsupported values
and mismatched load targets are refused naming their key path.

Multi-rank cases start every rank as its own spawned process joined through torch.distributed
(gloo, env:// on loopback, so they do not depend on the railyard backend) and bound every
wait in time. Skipped as a whole (exit 77) when torch does not import."""

import json
import multiprocessing
import os
import pathlib
import signal
import subprocess
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

import ranks  # noqa: E402
import torch_ranks  # noqa: E402

import railyard  # noqa: E402
import railyard.checkpoint as ckpt  # noqa: E402
import railyard.torch  # noqa: E402
from railyard.torch.checkpoint import SKELETON_KEY  # noqa: E402

# A whole multi-rank case, start-up of every rank (importing torch) included, stays well
# inside ctest's timeout.
RANK_TIMEOUT = ranks.RANK_TIMEOUT


# ---- helpers for the rank processes ----


class Net(torch.nn.Module):
    """Two weights of 1 MiB (split by rows when saved from several ranks), small biases and
    a 16-bit buffer that takes part in forward: bfloat16, or float16 under DDP on gloo,
    which in torch 1.13 cannot broadcast bfloat16."""

    def __init__(self, seed, width=256, hidden=1024, buffer_dtype=torch.bfloat16):
        super().__init__()
        torch.manual_seed(seed)
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)
        self.head = torch.nn.Linear(width, 10)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 10).to(buffer_dtype))

    def forward(self, x):
        return self.head(torch.tanh(self.down(torch.tanh(self.up(x))))) * self.scale.float()


def train(model, opt, steps, seed, width=256):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, width, generator=gen)
        y = torch.randn(8, 10, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def same_bits(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def assert_same_tree(got, want, where="state"):
    """Same structure, key types, container types and bit-identical tensors."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and same_bits(got, want), f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {type(got)} is no dict"
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same_tree(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_tree(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def init(rank, world_size, port):
    """Joins a gloo process group (so that these tests do not depend on the railyard
    backend) as torchrun's environment would have it."""
    return torch_ranks.init(rank, world_size, port, "gloo")


def start_ranks(target, world_size, *args):
    return ranks.start_ranks(target, world_size, torch_ranks.free_port(), *args)


def run_ranks(target, world_size, *args):
    ranks.join_ranks(start_ranks(target, world_size, *args))


# ---- what the ranks run (module level, for spawn) ----


def ddp_save(rank, world_size, port, path, out_dir):
    """Trains a DDP model 2 steps on rank-dependent data (the gradients are averaged, so the
    state is replicated), saves it, and writes this rank's save statistics; rank 0 also
    torch.saves the full state as the reference."""
    from torch.nn.parallel import DistributedDataParallel

    dist = init(rank, world_size, port)
    model = Net(seed=1, buffer_dtype=torch.float16)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    train(ddp, opt, 2, seed=100 + rank)
    state = {"model": ddp, "optimizer": opt, "step": 2}
    stats = railyard.torch.save(state, path, 2, metadata={"job": "ddp"}, timeout=30)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(stats, f)
    if rank == 0:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 2},
                   os.path.join(out_dir, "reference.pt"))
    dist.barrier()
    dist.destroy_process_group()


def ddp_load(rank, world_size, port, path, reference):
    """Loads into a freshly initialised DDP model and optimizer at this world size and
    checks them against the reference."""
    from torch.nn.parallel import DistributedDataParallel

    dist = init(rank, world_size, port)
    model = Net(seed=2, buffer_dtype=torch.float16)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    state = railyard.torch.load(path, {"model": ddp, "optimizer": opt})
    want = torch.load(reference)
    assert state["step"] == 2
    assert_same_tree(dict(model.state_dict()), dict(want["model"]))
    assert_same_tree(opt.state_dict(), want["optimizer"])
    dist.barrier()
    dist.destroy_process_group()


def save_then_get_killed(rank, world_size, port, path, conn):
    """Both ranks save step 1. Rank 0 then starts an asynchronous step 2 of 16 MiB, which
    rank 1 never joins, so it cannot commit whatever the timing: the kill lands inside it.
    Each rank says where it is through its pipe and waits to be killed."""
    dist = init(rank, world_size, port)
    model = Net(seed=1)
    railyard.torch.save({"model": model, "step": 1}, path, 1, asynchronous=True,
                        timeout=60).wait()
    if rank == 0:
        big = torch.ones((16 << 20) // 4)
        railyard.torch.save({"model": model, "big": big, "step": 2}, path, 2, asynchronous=True,
                            timeout=60)
        conn.send("saving 2")
    else:
        conn.send("not joining 2")
    time.sleep(RANK_TIMEOUT)  # until killed
    dist.destroy_process_group()
    raise SystemExit(4)


def save_different_trees(rank, world_size, port, path, out_dir):
    """Rank 1's tree has a key rank 0's has not: both saves must raise, naming the other."""
    dist = init(rank, world_size, port)
    state = {"w": torch.ones(4), "step": 1}
    if rank == 1:
        state["lr"] = 0.5
    try:
        railyard.torch.save(state, path, 1, timeout=30)
    except railyard.Error as e:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as f:
            f.write(f"{type(e).__name__}\n{e}")
    dist.destroy_process_group()


# ---- the cases ----


def test_model_and_adam_round_trip_bit_for_bit_and_train_on_identically(tmp_path):
    model = Net(seed=1, width=16, hidden=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    train(model, opt, 2, seed=5, width=16)
    extra = {"step": 2, "note": "warmup", "lr_history": [0.01, 0.01], "shape": (3, 4),
             "by_int": {7: None, 8: True}, "np": np.arange(5, dtype=np.int16),
             "scalar": np.float64(0.25), "empty": torch.zeros(0, 3)}
    tied = torch.arange(6.0)
    stats = railyard.torch.save({"model": model, "optimizer": opt, "tied": [tied, tied], **extra},
                                tmp_path, 2)
    assert stats["step"] == 2 and stats["bytes"] > 0

    c = ckpt.open(tmp_path)
    assert SKELETON_KEY in c.metadata and c.world_size == 1
    assert c.tensors["model.scale"].dtype == "BF16"
    assert c.tensors["optimizer.state.0.exp_avg"].shape == (32, 16)
    assert "tied.0" in c.tensors and "tied.1" not in c.tensors  # one tensor, saved once

    fresh = Net(seed=2, width=16, hidden=32)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    state = railyard.torch.load(tmp_path, {"model": fresh, "optimizer": fresh_opt})
    assert_same_tree(dict(fresh.state_dict()), dict(model.state_dict()))
    assert_same_tree(fresh_opt.state_dict(), opt.state_dict())
    assert_same_tree({k: state[k] for k in extra if k not in ("np", "scalar")},
                     {k: v for k, v in extra.items() if k not in ("np", "scalar")})
    assert same_bits(state["np"], extra["np"])
    assert type(state["scalar"]) is np.float64 and state["scalar"] == 0.25
    assert state["tied"][0] is state["tied"][1] and same_bits(state["tied"][0], tied)
    # Without targets: the module and optimizer as their state dicts, loadable as such.
    plain = railyard.torch.load(tmp_path)
    assert_same_tree(dict(plain["model"]), dict(model.state_dict()))
    assert plain["model"]._metadata == model.state_dict()._metadata

    train(model, opt, 1, seed=9, width=16)
    train(fresh, fresh_opt, 1, seed=9, width=16)
    assert_same_tree(dict(fresh.state_dict()), dict(model.state_dict()))
    assert_same_tree(fresh_opt.state_dict(), opt.state_dict())


@pytest.mark.parametrize("saved_by,loaded_by", [(2, 3), (3, 2)])
def test_ddp_ranks_save_a_share_each_and_any_world_size_loads(tmp_path, saved_by, loaded_by):
    path, out = str(tmp_path / "ckpt"), tmp_path / "out"
    out.mkdir()
    run_ranks(ddp_save, saved_by, path, str(out))

    reference = torch.load(out / "reference.pt")
    tensors = [t for t in reference["model"].values()]
    tensors += [t for s in reference["optimizer"]["state"].values() for t in s.values()]
    total = sum(t.numel() * t.element_size() for t in tensors)
    written = [json.loads((out / f"rank{r}.json").read_text())["bytes"] for r in range(saved_by)]
    # Every byte once (no replicas), and each rank within 2% of its 1/N.
    assert sum(written) == total, (written, total)
    for r, b in enumerate(written):
        assert abs(b - total / saved_by) <= 0.02 * total / saved_by, (r, written, total)
    c = ckpt.open(path)
    assert c.world_size == saved_by and c.metadata["job"] == "ddp"
    # The 1 MiB weights and their Adam moments are split by rows, one block per rank; the
    # small tensors are whole, in one rank's file each.
    pieces = {}
    for p in json.loads((pathlib.Path(c.step_dir) / "manifest.json").read_text())["pieces"]:
        pieces.setdefault(p["tensor"], []).append((p["offsets"][0] if p["offsets"] else 0,
                                                   p["file"]))
    rows = [(1024 * r // saved_by, f"rank-{r:05d}.bin") for r in range(saved_by)]
    for name in ("model.up.weight", "optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg_sq"):
        assert sorted(pieces[name]) == rows, (name, pieces[name])
    for name in ("model.up.bias", "model.scale", "optimizer.state.5.exp_avg"):
        assert len(pieces[name]) == 1, (name, pieces[name])

    # One process, no process group: the whole state, as torch.save had it.
    state = railyard.torch.load(path)
    assert state["step"] == 2
    assert_same_tree(dict(state["model"]), dict(reference["model"]))
    assert_same_tree(state["optimizer"], reference["optimizer"])
    run_ranks(ddp_load, loaded_by, path, str(out / "reference.pt"))


def test_ranks_that_pass_different_trees_commit_nothing(tmp_path):
    path, out = str(tmp_path / "ckpt"), tmp_path / "out"
    out.mkdir()
    run_ranks(save_different_trees, 2, path, str(out))
    kind0, message0 = (out / "rank0.err").read_text().split("\n", 1)
    kind1, message1 = (out / "rank1.err").read_text().split("\n", 1)
    assert kind0 == "InvalidArgumentError" and "railyard.torch.tree_sha256" in message0, message0
    assert "on rank 1" in message0, message0
    assert kind1 == "AbortedError" and "rank 0" in message1, message1
    assert ckpt.list(path) == []


def test_an_asynchronous_save_keeps_the_values_it_was_given(tmp_path):
    model = Net(seed=1)
    w = torch.arange(1 << 19, dtype=torch.float32).reshape(512, 1024)  # 2 MiB
    before = {"model": {k: v.clone() for k, v in model.state_dict().items()}, "w": w.clone()}
    handle = railyard.torch.save({"model": model, "w": w, "step": 1}, tmp_path, 1,
                                 asynchronous=True)
    assert isinstance(handle, railyard.torch.SaveHandle) and handle.step == 1
    with torch.no_grad():  # at once: the save has its own copy
        w.add_(1.0)
        for p in model.parameters():
            p.zero_()
    handle.wait()
    assert handle.done
    got = railyard.torch.load(tmp_path)
    assert same_bits(got["w"], before["w"]) and got["step"] == 1
    assert_same_tree(dict(got["model"]), before["model"])

    # The next one, waited for through railyard.torch.wait(path); then a synchronous save
    # into the same directory that keeps the last 2 steps (a new writer, opened after the one
    # in flight finished).
    railyard.torch.save({"w": w, "step": 2}, tmp_path, 2, asynchronous=True)
    w.add_(1.0)
    railyard.torch.wait(tmp_path)
    assert same_bits(railyard.torch.load(tmp_path)["w"], before["w"] + 1.0)
    assert railyard.torch.save({"w": w, "step": 3}, tmp_path, 3, keep_last=2)["step"] == 3
    assert [s.step for s in ckpt.list(tmp_path)] == [2, 3]
    assert same_bits(railyard.torch.load(tmp_path, step=2)["w"], before["w"] + 1.0)
    assert same_bits(railyard.torch.load(tmp_path)["w"], before["w"] + 2.0)


def test_a_corrupt_newest_step_falls_back_to_the_previous_one(tmp_path):
    w = torch.arange(4096, dtype=torch.float32)
    railyard.torch.save({"w": w, "step": 1}, tmp_path, 1)
    railyard.torch.save({"w": w + 1, "step": 2}, tmp_path, 2)
    shard = pathlib.Path(ckpt.open(tmp_path, 2).step_dir) / "rank-00000.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # inside "w"
    shard.write_bytes(bytes(data))
    state = railyard.torch.load(tmp_path)
    assert state["step"] == 1 and same_bits(state["w"], w)
    with pytest.raises(railyard.CorruptCheckpointError, match="rank-00000.bin"):
        railyard.torch.load(tmp_path, step=2)


def test_sigkill_during_a_save_leaves_the_previous_step_loadable(tmp_path):
    binary = os.environ.get("RAILYARD_BINARY")
    assert binary, "RAILYARD_BINARY (the railyard CLI) is unset: run under ctest"
    path = str(tmp_path / "ckpt")
    ctx = multiprocessing.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(2)]
    # Each rank gets its own pipe's sending end, so not start_ranks.
    procs, port = [], torch_ranks.free_port()
    for r in range(2):
        procs.append(ctx.Process(target=save_then_get_killed,
                                 args=(r, 2, port, path, pipes[r][1])))
        procs[r].start()
    try:
        said = []
        for r, (reader, _) in enumerate(pipes):
            assert reader.poll(RANK_TIMEOUT), f"rank {r} said nothing in {RANK_TIMEOUT} s"
            said.append(reader.recv())
        assert said == ["saving 2", "not joining 2"], said
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.join(30)
            assert p.exitcode == -signal.SIGKILL, p.exitcode
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()

    steps = ckpt.list(path)
    assert [s.step for s in steps if s.state == "committed"] == [1], steps
    assert all(s.state == "incomplete" for s in steps if s.step == 2), steps
    state = railyard.torch.load(path)
    assert state["step"] == 1
    assert_same_tree(dict(state["model"]), dict(Net(seed=1).state_dict()))
    with pytest.raises(railyard.NotFoundError):
        railyard.torch.load(path, step=2)
    verify = subprocess.run([binary, "ckpt", "verify", path], capture_output=True, text=True,
                            timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("step 1 OK"), verify.stdout


@pytest.mark.parametrize("value,where,what", [
    ({"hooks": {"on_step": lambda s: s}}, "state['hooks']['on_step']", "a function"),
    ({"seen": {1, 2}}, "state['seen']", "a set"),
    ({"opt": {"state": {1.5: torch.ones(1)}}}, "state['opt']['state']", "key 1.5 is a float"),
    ({"fft": [torch.ones(2, dtype=torch.complex64)]}, "state['fft'][0]", "torch.complex64"),
])
def test_an_unsupported_value_is_refused_naming_its_key_path(tmp_path, value, where, what):
    with pytest.raises((TypeError, ValueError)) as e:
        railyard.torch.save({"model": torch.nn.Linear(2, 2), **value}, tmp_path / "c", 1)
    assert str(e.value).startswith(where) and what in str(e.value), str(e.value)
    assert not (tmp_path / "c").exists()  # refused before anything was written


def test_a_load_target_that_does_not_match_is_refused_naming_its_key_path(tmp_path):
    railyard.torch.save({"model": torch.nn.Linear(2, 2), "extra": {"t": torch.ones(3)}},
                        tmp_path, 1)
    with pytest.raises(ValueError, match=r"state\['extra'\] .* has no key 'u'"):
        railyard.torch.load(tmp_path, {"extra": {"u": torch.ones(3)}})
    with pytest.raises(ValueError, match=r"state\['extra'\]\['t'\] .*float32 \[3\].*float32 \[4\]"):
        railyard.torch.load(tmp_path, {"extra": {"t": torch.ones(4)}})
    ckpt.save({"w": np.ones(2, np.float32)}, tmp_path / "plain", 1)
    with pytest.raises(railyard.FailedPreconditionError, match="not saved by railyard.torch"):
        railyard.torch.load(tmp_path / "plain")
