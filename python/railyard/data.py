"""Packed training data: pack samples into a few large shards, read each rank's share of a
seeded shuffle with exact resume (storage/data_pack.h, storage/data_reader.h).

    import railyard.data as data
    data.pack_directory("/data/raw", "/data/packed")          # every file is a sample
    ds = data.Dataset("/data/packed", rank=rank, world_size=world, seed=1234)
    for step, sample in zip(range(steps), ds): ...            # bytes; the stream never ends
    state = ds.state_dict()                                   # save with the checkpoint
    ds.load_state_dict(state)                                 # resume, also at another world size

With torch installed, Dataset is a torch.utils.data.IterableDataset (use DataLoader with
num_workers=0: the reader prefetches in its own threads); without torch it is a plain
iterable with the same methods. This module imports torch when it is installed; ``import
railyard`` alone does not.
"""

import os
from collections import namedtuple

from railyard import _core

try:
    from torch.utils.data import IterableDataset as _Base

    HAVE_TORCH = True
except ImportError:
    _Base = object
    HAVE_TORCH = False

__all__ = ["Dataset", "PackStats", "Sample", "pack_directory", "pack_synthetic", "HAVE_TORCH"]

PackStats = namedtuple("PackStats", "samples bytes shards seconds dataset_id")
# One sample: its number in pack order, the epoch and global position it was read at, its bytes.
Sample = namedtuple("Sample", "index epoch position data")

_SHARD_BYTES = 256 << 20


def pack_directory(src, out, *, shard_bytes=_SHARD_BYTES, overwrite=False):
    """Packs every regular file under ``src`` (recursively; sample i is the i-th path in
    bytewise order) into the dataset directory ``out``. The index is written last, so a
    failure leaves no dataset rather than a broken one."""
    return PackStats(
        **_core.pack_directory(os.fspath(src), os.fspath(out), shard_bytes, overwrite)
    )


def pack_synthetic(
    out, samples, *, min_bytes=1024, max_bytes=4096, seed=0, shard_bytes=_SHARD_BYTES, overwrite=False
):
    """Packs a generated set: sample i's size and bytes derive from (seed, i)
    (storage/synthetic_data.h), for tests and benchmarks."""
    return PackStats(
        **_core.pack_synthetic(
            os.fspath(out), samples, min_bytes, max_bytes, seed, shard_bytes, overwrite
        )
    )


class Dataset(_Base):
    """Rank ``rank`` of ``world_size``'s share of a packed dataset, as an endless stream.

    Epoch e is a permutation of the samples keyed by (seed, e) (pack order with
    shuffle=False); epochs follow one another, and rank r takes global positions r, r + W,
    r + 2W, ... of that stream. Each item is one sample's bytes (``transform(bytes)`` when
    given), or with ``batch=k`` a list of k of them. ``state_dict()`` after every rank has
    taken the same number of items is the same on every rank, and a Dataset of any world
    size that loads it continues where the uninterrupted stream would.

    ``timeout`` (seconds) bounds the wait for one item; a corrupt or missing shard raises
    CorruptCheckpointError (DATA_LOSS) naming the shard, sample and offset.
    """

    def __init__(
        self,
        path,
        *,
        rank=0,
        world_size=1,
        seed=0,
        epoch=0,
        shuffle=True,
        batch=None,
        prefetch=4,
        threads=2,
        timeout=300.0,
        transform=None,
    ):
        if HAVE_TORCH:
            super().__init__()
        self.path = os.fspath(path)
        self.rank = rank
        self.world_size = world_size
        self.batch = batch
        self.timeout = timeout
        self.transform = transform
        self._reader = _core.DataReader(
            self.path,
            rank,
            world_size,
            seed,
            epoch,
            shuffle,
            1 if batch is None else batch,
            prefetch,
            threads,
            timeout,
        )

    def __iter__(self):
        return self

    def __next__(self):
        items = [self._item(s[3]) for s in self._reader.next_batch(self.timeout)]
        return items[0] if self.batch is None else items

    def next_samples(self):
        """The next item's samples with where they came from: a list of Sample."""
        return [Sample(*s) for s in self._reader.next_batch(self.timeout)]

    def _item(self, data):
        return data if self.transform is None else self.transform(data)

    def state_dict(self):
        """The global position after what this rank has taken (a one-line JSON text)."""
        return {"position": self._reader.save_position()}

    def load_state_dict(self, state):
        """Continues from ``state_dict()``'s position: drops what was prefetched. Raises
        FailedPreconditionError for a position of another dataset, seed or shuffle."""
        self._reader.restore_position(state["position"])

    def read_sample(self, index):
        """Sample ``index`` (pack order), checksummed."""
        return self._reader.read_sample(index)

    @property
    def num_samples(self):
        return self._reader.num_samples

    @property
    def dataset_id(self):
        return self._reader.dataset_id

    def __reduce__(self):
        raise TypeError(
            "a railyard.data.Dataset reads in its own threads and cannot be pickled; "
            "use DataLoader(..., num_workers=0)"
        )

    def __repr__(self):
        return (
            f"Dataset('{self.path}', rank={self.rank}, world_size={self.world_size}, "
            f"samples={self.num_samples})"
        )
