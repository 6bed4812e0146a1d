"""railyard.data's Dataset as a torch IterableDataset: a DataLoader over it, and resume
through state_dict() between DataLoader iterations. Skipped as a whole (exit 77) when torch
does not import."""

import pickle

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

import railyard.data as data  # noqa: E402


@pytest.fixture
def dataset(tmp_path):
    data.pack_synthetic(tmp_path / "packed", 50, min_bytes=8, max_bytes=8, seed=3)
    return str(tmp_path / "packed")


def as_tensor(sample):
    return torch.frombuffer(bytearray(sample), dtype=torch.uint8)


def test_dataset_is_an_iterable_dataset_a_dataloader_batches(dataset):
    ds = data.Dataset(dataset, seed=7, transform=as_tensor)
    assert data.HAVE_TORCH and isinstance(ds, torch.utils.data.IterableDataset)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0)
    batches = iter(loader)
    first = [next(batches) for _ in range(3)]
    assert all(b.shape == (4, 8) and b.dtype == torch.uint8 for b in first)
    state = ds.state_dict()  # 12 samples taken through the loader
    following = next(batches)

    resumed = data.Dataset(dataset, seed=7, transform=as_tensor)
    resumed.load_state_dict(state)
    again = next(iter(torch.utils.data.DataLoader(resumed, batch_size=4, num_workers=0)))
    assert torch.equal(again, following)


def test_a_dataset_refuses_to_be_pickled_for_worker_processes(dataset):
    with pytest.raises(TypeError, match="num_workers=0"):
        pickle.dumps(data.Dataset(dataset))
