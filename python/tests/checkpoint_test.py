"""railyard.checkpoint with numpy only (one rank): every dtype, bfloat16 as raw words, nested
dicts, loads in place and by block, asynchronous saves, verify, list, and the errors."""

import os
import subprocess

import numpy as np
import pytest

import railyard
import railyard.checkpoint as ckpt

# One array per dtype, with the extreme values of each.
NUMPY_VALUES = {
    "BOOL": np.array([True, False, True]),
    "U8": np.array([0, 1, 255], np.uint8),
    "I8": np.array([-128, 0, 127], np.int8),
    "U16": np.array([0, 1, 65535], np.uint16),
    "I16": np.array([-32768, 0, 32767], np.int16),
    "F16": np.array([-65504.0, 6.1e-5, np.inf], np.float16),
    "U32": np.array([0, 1, 2**32 - 1], np.uint32),
    "I32": np.array([-(2**31), 0, 2**31 - 1], np.int32),
    "F32": np.array([-3.4e38, 1.5e-45, np.nan], np.float32),
    "U64": np.array([0, 1, 2**64 - 1], np.uint64),
    "I64": np.array([-(2**63), 0, 2**63 - 1], np.int64),
    "F64": np.array([-1.7e308, 5e-324, -np.inf], np.float64),
}
# bfloat16 words: 1.0, -2.0, +inf, a NaN, the smallest subnormal, -0.0.
BF16_WORDS = np.array([0x3F80, 0xC000, 0x7F80, 0x7FC1, 0x0001, 0x8000], np.uint16)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", sorted(NUMPY_VALUES))
def test_every_numpy_dtype_round_trips_bit_for_bit(tmp_path, dtype):
    value = NUMPY_VALUES[dtype].reshape(3, 1)
    ckpt.save({"t": value}, tmp_path, 1)
    c = ckpt.open(tmp_path)
    assert c.tensors["t"] == ckpt.TensorInfo("t", dtype, (3, 1))
    assert same_bits(c.load()["t"], value)


def test_bfloat16_round_trips_as_raw_words(tmp_path):
    ckpt.save({"b": ckpt.bfloat16(BF16_WORDS.reshape(2, 3))}, tmp_path, 1)
    assert ckpt.open(tmp_path).tensors["b"].dtype == "BF16"
    loaded = ckpt.load(tmp_path)["b"]
    assert isinstance(loaded, ckpt.RawTensor) and loaded.dtype == "BF16"
    assert same_bits(loaded.words, BF16_WORDS.reshape(2, 3))
    # Into given words, in place.
    words = np.zeros((2, 3), np.uint16)
    ckpt.load(tmp_path, {"b": ckpt.RawTensor(words, "BF16")})
    assert same_bits(words, BF16_WORDS.reshape(2, 3))
    with pytest.raises(ValueError, match="uint16 words"):
        ckpt.bfloat16(BF16_WORDS.astype(np.int32))


def test_scalars_and_empty_tensors(tmp_path):
    state = {"s": np.array(2.5, np.float64), "e": np.zeros((0, 4), np.int32)}
    ckpt.save(state, tmp_path, 1)
    loaded = ckpt.load(tmp_path)
    assert same_bits(loaded["s"], state["s"]) and same_bits(loaded["e"], state["e"])


def test_nested_dicts_are_flattened_with_dots(tmp_path):
    a, b, c = (np.full(2, i, np.int16) for i in range(3))
    ckpt.save({"model": {"layer0": {"w": a}, "head.w": b}, "step": c}, tmp_path, 5, {"k": "v"})
    checkpoint = ckpt.open(tmp_path)
    assert sorted(checkpoint.tensors) == ["model.head.w", "model.layer0.w", "step"]
    assert checkpoint.metadata == {"k": "v"} and checkpoint.step == 5
    # A nested target is filled through the same names.
    target = {"model": {"layer0": {"w": np.zeros(2, np.int16)}}}
    ckpt.load(tmp_path, target)
    assert same_bits(target["model"]["layer0"]["w"], a)
    with pytest.raises(ValueError, match="'a.b' appears twice"):
        ckpt.save({"a.b": a, "a": {"b": b}}, tmp_path, 6)


def test_non_contiguous_arrays_are_saved_row_major(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    ckpt.save({"t": base.T, "s": base[:, ::2]}, tmp_path, 1)
    loaded = ckpt.load(tmp_path)
    assert same_bits(loaded["t"], np.ascontiguousarray(base.T))
    assert same_bits(loaded["s"], np.ascontiguousarray(base[:, ::2]))


def test_loads_in_place_and_by_block(tmp_path):
    w = np.arange(30, dtype=np.float32).reshape(5, 6)
    ckpt.save({"w": w}, tmp_path, 1)
    target = np.zeros_like(w)
    state = {"w": target}
    assert ckpt.load(tmp_path, state) is state and state["w"] is target
    assert same_bits(target, w)
    c = ckpt.open(tmp_path)
    assert same_bits(c.read("w", (1, 2), (3, 2)), w[1:4, 2:4])
    block = np.zeros((2, 6), np.float32)
    assert c.read("w", (3, 0), out=block) is block
    assert same_bits(block, w[3:5])
    shard = np.zeros((2, 3), np.float32)
    ckpt.load(tmp_path, {"w": ckpt.Shard(shard, (2, 3), (5, 6))})
    assert same_bits(shard, w[2:4, 3:6])


def test_load_refuses_targets_that_do_not_fit(tmp_path):
    ckpt.save({"w": np.zeros((2, 3), np.float32)}, tmp_path, 1)
    with pytest.raises(ValueError, match=r"'w' is F32 \[2, 3\].*into F32 \[3, 2\]"):
        ckpt.load(tmp_path, {"w": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match=r"'w' is F32 .* into F64"):
        ckpt.load(tmp_path, {"w": np.zeros((2, 3), np.float64)})
    with pytest.raises(ValueError, match="non-contiguous"):
        ckpt.load(tmp_path, {"w": np.zeros((3, 2), np.float32).T})
    # The library's bounds check names the tensor and the dimension.
    with pytest.raises(ValueError, match=r"slice \[1:3, 0:3\] of tensor 'w'.*out of bounds in dim 0"):
        ckpt.open(tmp_path).read("w", (1, 0), (2, 3))
    with pytest.raises(FileNotFoundError, match="no tensor 'nope'"):
        ckpt.load(tmp_path, {"nope": np.zeros(1)})


def test_async_save_returns_a_handle_once_copied(tmp_path):
    w = np.arange(1 << 16, dtype=np.float32)
    writer = ckpt.AsyncWriter(tmp_path, keep_last=2)
    handle = writer.save({"w": w}, 1, {"note": "first"})
    assert handle.step == 1
    w += 1  # the save copied w before returning: this change is not in step 1
    handle.wait()
    assert handle.done
    assert handle.stats["last_save"]["step"] == 1 and handle.stats["last_save"]["bytes"] == w.nbytes
    second = writer.save({"w": w}, 2)
    second.wait()
    assert same_bits(ckpt.load(tmp_path, step=1)["w"], w - 1)
    assert same_bits(ckpt.load(tmp_path)["w"], w)
    assert ckpt.open(tmp_path, 1).metadata == {"note": "first"}
    # A background failure (step 2 exists) comes back from wait(), once.
    failing = writer.save({"w": w}, 2)
    with pytest.raises(railyard.AlreadyExistsError, match="step 2"):
        failing.wait()
    writer.wait()
    # The module-level function: the handle keeps its saver alive.
    h = ckpt.save_async({"w": w}, tmp_path, 3, keep_last=2)
    h.wait()
    assert h.done and ckpt.open(tmp_path).step == 3
    assert [s.step for s in ckpt.list(tmp_path)] == [2, 3]  # keep_last=2 removed step 1


def test_verify_names_a_corrupted_byte_and_load_falls_back(tmp_path):
    w = np.arange(4096, dtype=np.int32)
    ckpt.save({"w": w}, tmp_path, 1)
    ckpt.save({"w": w + 1}, tmp_path, 2)
    assert ckpt.verify(tmp_path).ok
    shard = tmp_path / "step-00000002" / "rank-00000.bin"
    with shard.open("r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x01]))

    with pytest.raises(railyard.CorruptCheckpointError) as error:
        ckpt.verify(tmp_path)
    assert isinstance(error.value, RuntimeError) and error.value.code == "DATA_LOSS"
    assert "rank-00000.bin" in str(error.value) and "checksum" in str(error.value)
    assert error.value.report.step == 2 and error.value.report.fallback_step == 1
    report = ckpt.verify(tmp_path, raise_on_error=False)
    assert not report.ok and isinstance(report.error, railyard.CorruptCheckpointError)
    assert ckpt.verify(tmp_path, 1).ok

    # The same verdict from `railyard ckpt verify`: exit 1 for a corrupt step.
    binary = os.environ.get("RAILYARD_BINARY")
    if binary:
        cli = subprocess.run([binary, "ckpt", "verify", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 1, cli.stdout + cli.stderr
        assert "rank-00000.bin" in cli.stdout + cli.stderr

    # Loading skips the corrupt step, saying why.
    c = ckpt.open(tmp_path)
    assert c.step == 1 and same_bits(c.load()["w"], w)
    assert any("step 2" in note for note in c.fallback_notes)
    with pytest.raises(railyard.CorruptCheckpointError):
        ckpt.open(tmp_path, 2)
    steps = {s.step: s for s in ckpt.list(tmp_path, verify=True)}
    assert steps[1].state == "committed" and steps[2].state == "corrupt"
    assert "rank-00000.bin" in steps[2].detail


def test_list_shows_every_step_and_the_latest(tmp_path):
    assert ckpt.list(tmp_path) == []
    for step in (3, 7):
        ckpt.save({"w": np.zeros(8, np.uint8)}, tmp_path, step)
    steps = ckpt.list(tmp_path)
    assert [(s.step, s.state, s.latest, s.world_size) for s in steps] == [
        (3, "committed", False, 1),
        (7, "committed", True, 1),
    ]
    assert steps[1].path == str(tmp_path / "step-00000007") and steps[1].bytes > 8
    (tmp_path / "step-00000009").mkdir()  # a step directory without its manifest
    assert ckpt.list(tmp_path)[-1].state == "incomplete"


def test_errors_carry_the_library_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist") as e:
        ckpt.load(tmp_path / "missing")
    assert isinstance(e.value, railyard.NotFoundError) and e.value.code == "NOT_FOUND"
    with pytest.raises(ValueError, match="complex128"):
        ckpt.save({"c": np.zeros(2, np.complex128)}, tmp_path, 1)
    with pytest.raises(ValueError, match="little-endian"):
        ckpt.save({"b": np.zeros(2, ">f4")}, tmp_path, 1)
    with pytest.raises(TypeError, match="'x': list is not a numpy array"):
        ckpt.save({"x": [1, 2]}, tmp_path, 1)
    with pytest.raises(ValueError, match=r"rank 0 step 1: tensor 'w'.*piece \[1:3, 0:2\] is out of bounds"):
        ckpt.save({"w": ckpt.Shard(np.zeros((2, 2), np.float32), (1, 0), (2, 2))}, tmp_path, 1)
    with pytest.raises(ValueError, match="run id"):
        ckpt.Writer(tmp_path, rank=0, world_size=2)
