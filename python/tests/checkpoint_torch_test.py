"""railyard.checkpoint with CPU torch tensors: every dtype torch and Railyard share (bfloat16
included), bfloat16 between torch and raw words, loads in place through the data pointer.
Skipped as a whole (exit 77) when torch does not import."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

import railyard.checkpoint as ckpt  # noqa: E402

TORCH_DTYPES = {
    "BOOL": torch.bool,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I32": torch.int32,
    "F32": torch.float32,
    "I64": torch.int64,
    "F64": torch.float64,
}


def sample(dtype):
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        values = [info.min, info.max, info.tiny, -0.0, float("inf"), float("nan")]
    else:
        info = torch.iinfo(dtype)
        values = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 7]
    return torch.tensor(values, dtype=dtype).reshape(2, 3)


def same_bits(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape
            and a.contiguous().view(torch.uint8).equal(b.contiguous().view(torch.uint8)))


@pytest.mark.parametrize("name", sorted(TORCH_DTYPES))
def test_every_torch_dtype_round_trips_bit_for_bit(tmp_path, name):
    value = sample(TORCH_DTYPES[name])
    ckpt.save({"t": value}, tmp_path, 1)
    assert ckpt.open(tmp_path).tensors["t"].dtype == name
    loaded = ckpt.load(tmp_path, torch=True)["t"]
    assert isinstance(loaded, torch.Tensor) and same_bits(loaded, value)
    target = torch.zeros_like(value)
    pointer = target.data_ptr()
    ckpt.load(tmp_path, {"t": target})
    assert target.data_ptr() == pointer and same_bits(target, value)


def test_bfloat16_is_the_same_words_with_and_without_torch(tmp_path):
    value = torch.tensor([1.0, -2.5, 3.0e38, 1.0e-38], dtype=torch.bfloat16)
    words = value.view(torch.int16).numpy().view(np.uint16)
    ckpt.save({"from_torch": value, "from_words": ckpt.bfloat16(words.copy())}, tmp_path, 1)
    raw = ckpt.load(tmp_path)
    assert raw["from_torch"].dtype == "BF16"
    np.testing.assert_array_equal(raw["from_torch"].words, words)
    np.testing.assert_array_equal(raw["from_words"].words, words)
    as_torch = ckpt.load(tmp_path, torch=True)
    assert same_bits(as_torch["from_words"], value) and same_bits(as_torch["from_torch"], value)
    assert same_bits(raw["from_torch"].to_torch(), value)


def test_tensors_shards_and_numpy_mix(tmp_path):
    w = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state = {
        "model": {"w": w.t(), "h": torch.ones(3, dtype=torch.bfloat16, requires_grad=True)},
        "rows": ckpt.Shard(w[:2], (0, 0), (2, 6)),
        "np": np.arange(3, dtype=np.int64),
    }
    ckpt.save(state, tmp_path, 1)
    loaded = ckpt.load(tmp_path)
    np.testing.assert_array_equal(loaded["model.w"], w.t().contiguous().numpy())
    np.testing.assert_array_equal(loaded["rows"], w[:2].numpy())
    # Into a torch Shard, and refusing a target it cannot fill in place.
    half = torch.zeros(2, 4)
    ckpt.load(tmp_path, {"model.w": ckpt.Shard(half, (3, 0), (6, 4))})
    assert torch.equal(half, w.t()[3:5])
    with pytest.raises(ValueError, match="non-contiguous"):
        ckpt.load(tmp_path, {"model.w": torch.zeros(4, 6).t()})
    with pytest.raises(ValueError, match="F32 .* into BF16"):
        ckpt.load(tmp_path, {"model.w": torch.zeros(6, 4, dtype=torch.bfloat16)})


def test_async_save_of_tensors(tmp_path):
    w = torch.randn(256, 256)
    before = w.clone()
    handle = ckpt.save_async({"w": w}, tmp_path, 3)
    w.add_(1.0)  # copied already: not in the checkpoint
    handle.wait()
    assert handle.done and torch.equal(ckpt.load(tmp_path, torch=True)["w"], before)
