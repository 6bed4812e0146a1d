"""railyard.data without needing torch: packing, the reader's exact resume (also at another
world size, with rank processes), batches, and its errors. railyard.data works whether or
not torch is installed; data_torch_test.py checks the IterableDataset side."""

import json
import os
import subprocess
import sys

import pytest

import railyard
import railyard.data as data
import ranks

SEED = 99  # ranks.read_stream's


@pytest.fixture
def dataset(tmp_path):
    out = tmp_path / "packed"
    stats = data.pack_synthetic(out, 101, min_bytes=16, max_bytes=64, seed=5, shard_bytes=1024)
    assert stats.samples == 101 and stats.shards > 1
    return str(out)


def stream(path, n, **options):
    """The first n samples of the one-rank stream: global positions 0 .. n-1."""
    ds = data.Dataset(path, seed=SEED, **options)
    return [ds.next_samples()[0] for _ in range(n)]


def test_pack_directory_keeps_bytewise_path_order(tmp_path):
    src = tmp_path / "raw"
    (src / "b").mkdir(parents=True)
    files = {"b/2.txt": b"two", "a.txt": b"one", "b/10.txt": b"ten", "c": b""}
    for name, content in files.items():
        (src / name).write_bytes(content)
    stats = data.pack_directory(src, tmp_path / "out")
    assert stats.samples == 4 and stats.bytes == 9
    ds = data.Dataset(tmp_path / "out", shuffle=False)
    assert [ds.read_sample(i) for i in range(4)] == [files[n] for n in sorted(files)]
    assert [next(ds) for _ in range(5)] == [files[n] for n in sorted(files)] + [b"one"]
    with pytest.raises(railyard.AlreadyExistsError, match="already holds a packed dataset"):
        data.pack_directory(src, tmp_path / "out")
    assert data.pack_directory(src, tmp_path / "out", overwrite=True).samples == 4
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.pack_directory(tmp_path / "nope", tmp_path / "out2")


def test_resume_gives_exactly_the_samples_that_would_have_come(dataset):
    ds = data.Dataset(dataset, seed=SEED)
    assert ds.num_samples == 101
    first = [next(ds) for _ in range(150)]  # into the second epoch
    state = ds.state_dict()
    rest = [next(ds) for _ in range(40)]
    resumed = data.Dataset(dataset, seed=SEED)
    resumed.load_state_dict(state)
    assert [next(resumed) for _ in range(40)] == rest
    assert first + rest == [s.data for s in stream(dataset, 190)]
    # Each epoch is a permutation: every sample once.
    assert sorted(s.index for s in stream(dataset, 101)) == list(range(101))


def test_resume_at_another_world_size_continues_the_global_stream(dataset, tmp_path):
    state = str(tmp_path / "state.json")
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    ranks.run_ranks(ranks.read_stream, 2, dataset, 30, "", state, str(before))
    ranks.run_ranks(ranks.read_stream, 3, dataset, 25, state, "", str(after))
    expected = stream(dataset, 60 + 75)

    def taken(directory, world):
        by_rank = [json.loads((directory / f"rank{r}.json").read_text()) for r in range(world)]
        return by_rank

    for world, directory, start in ((2, before, 0), (3, after, 60)):
        for r, samples in enumerate(taken(directory, world)):
            for j, (position, hex_data) in enumerate(samples):
                g = start + r + world * j  # rank r of W takes positions S + r, S + r + W, ...
                assert position == expected[g].position == g
                assert bytes.fromhex(hex_data) == expected[g].data
    with open(state) as f:
        assert json.loads(json.load(f)["position"])["offset"] == 60


def test_batches_are_lists_and_resume_between_them(dataset):
    ds = data.Dataset(dataset, seed=SEED, batch=4, transform=len)
    batches = [next(ds) for _ in range(3)]
    assert all(len(b) == 4 for b in batches)
    assert sum(batches, []) == [len(s.data) for s in stream(dataset, 12)]
    state = ds.state_dict()
    again = data.Dataset(dataset, seed=SEED, batch=4, transform=len)
    again.load_state_dict(state)
    assert next(again) == [len(s.data) for s in stream(dataset, 16)[12:]]


def test_positions_of_another_dataset_or_seed_are_refused(dataset, tmp_path):
    state = data.Dataset(dataset, seed=SEED).state_dict()
    with pytest.raises(railyard.FailedPreconditionError, match="seed"):
        data.Dataset(dataset, seed=SEED + 1).load_state_dict(state)
    other = data.pack_synthetic(tmp_path / "other", 10, seed=1)
    with pytest.raises(railyard.FailedPreconditionError):
        data.Dataset(tmp_path / "other", seed=SEED).load_state_dict(state)
    assert other.dataset_id != data.Dataset(dataset).dataset_id
    with pytest.raises(ValueError):
        data.Dataset(dataset).load_state_dict({"position": "not a position"})
    with pytest.raises(ValueError, match="rank"):
        data.Dataset(dataset, rank=2, world_size=2)


def test_a_corrupt_shard_is_data_loss_naming_it(dataset):
    shard = os.path.join(dataset, "shard-00000.bin")
    with open(shard, "r+b") as f:
        f.seek(3)
        b = f.read(1)
        f.seek(3)
        f.write(bytes([b[0] ^ 0xFF]))
    ds = data.Dataset(dataset, shuffle=False)
    with pytest.raises(railyard.CorruptCheckpointError, match="shard-00000.bin"):
        next(ds)
    with pytest.raises(railyard.CorruptCheckpointError):
        ds.read_sample(0)


def test_importable_without_torch(dataset):
    # torch made unimportable: Dataset is a plain iterable with the same methods.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import railyard.data as d\n"
        f"ds = d.Dataset({dataset!r}, seed=1)\n"
        "assert not d.HAVE_TORCH and type(ds).__mro__[1] is object\n"
        "state = ds.state_dict(); a = next(ds); ds.load_state_dict(state); assert next(ds) == a\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
