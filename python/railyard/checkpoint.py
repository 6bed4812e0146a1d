"""Sharded, atomic, checksummed checkpoints of numpy arrays and CPU torch tensors.

A state dict maps names to tensors; nested dicts are flattened with '.'-joined keys
({"layer0": {"w": a}} saves the tensor "layer0.w"). A tensor is a numpy array, a CPU torch
tensor, a RawTensor (its elements as unsigned words: bfloat16 without torch), or a Shard of
any of these (one rank's block of a larger tensor). Memory crosses to C++ without a copy:
numpy arrays through the buffer protocol, torch tensors through their data pointer; torch is
only touched when a value is a torch tensor or when ``load(..., torch=True)`` asks for them.

    import railyard.checkpoint as ckpt
    ckpt.save({"w": w, "opt": {"m": m}}, "/ckpt", step=100)
    state = ckpt.load("/ckpt")                      # {"w": ..., "opt.m": ...}, latest step
    ckpt.load("/ckpt", {"w": w})                    # into w, in place

Several ranks: each creates a Writer with its rank, the world size and a run id shared by
the ranks of this run (and different from every earlier run's), and saves its own pieces;
the step is committed when every rank succeeded (storage/checkpoint.h, the commit protocol).
Loading reads any block of any tensor, whatever world size wrote it (resharding).

The layout, commit protocol and checksums are the C++ library's (docs/storage.md); docs/
python.md lists the dtypes and errors.
"""

import builtins
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from railyard import _core

__all__ = [
    "AsyncWriter",
    "Checkpoint",
    "RawTensor",
    "SaveHandle",
    "Shard",
    "StepInfo",
    "TensorInfo",
    "VerifyReport",
    "Writer",
    "bfloat16",
    "list",
    "load",
    "open",
    "save",
    "save_async",
    "verify",
]

# numpy's dtype.str -> Railyard's dtype name. Railyard stores little-endian, so big-endian
# arrays ('>f4') have no entry.
_FROM_NUMPY = {
    "|b1": "BOOL",
    "|u1": "U8",
    "|i1": "I8",
    "<u2": "U16",
    "<i2": "I16",
    "<f2": "F16",
    "<u4": "U32",
    "<i4": "I32",
    "<f4": "F32",
    "<u8": "U64",
    "<i8": "I64",
    "<f8": "F64",
}
_TO_NUMPY = {name: np.dtype(s) for s, name in _FROM_NUMPY.items()}
# Unsigned words of each element size: how a RawTensor holds a dtype numpy lacks.
_WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_SIGNED_WORDS = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
# torch's dtype attribute names -> Railyard's; looked up on torch only when torch is in use.
_TORCH_NAMES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "uint16": "U16",
    "int16": "I16",
    "float16": "F16",
    "bfloat16": "BF16",
    "uint32": "U32",
    "int32": "I32",
    "float32": "F32",
    "uint64": "U64",
    "int64": "I64",
    "float64": "F64",
}


def _torch_module():
    """torch if this process imported it, else None: a value can only be a tensor then."""
    return sys.modules.get("torch")


def _is_tensor(value):
    torch = _torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def _torch_dtypes(torch):
    """{torch dtype: Railyard name} for the dtypes this torch has (1.13 has no uint16/32/64)."""
    return {getattr(torch, n): name for n, name in _TORCH_NAMES.items() if hasattr(torch, n)}


class RawTensor:
    """A tensor as unsigned words of its element size, with its Railyard dtype name.

    numpy has no bfloat16, so a BF16 tensor is saved from, and loaded without torch into, a
    RawTensor of uint16 words: ``RawTensor(words, "BF16")`` or ``bfloat16(words)``.
    """

    __slots__ = ("words", "dtype")

    def __init__(self, words, dtype="BF16"):
        size = _core.dtype_size(dtype)
        if not isinstance(words, np.ndarray) or words.dtype != _WORDS[size]:
            raise ValueError(
                f"a {dtype} RawTensor holds a numpy array of {_WORDS[size].name} words, got "
                f"{type(words).__name__}"
                + (f" of {words.dtype}" if isinstance(words, np.ndarray) else "")
            )
        self.words = words
        self.dtype = dtype

    @property
    def shape(self):
        return self.words.shape

    def to_torch(self):
        """The same memory as a torch tensor of this dtype (no copy)."""
        import torch

        names = {name: dtype for dtype, name in _torch_dtypes(torch).items()}
        if self.dtype not in names:
            raise ValueError(f"torch {torch.__version__} has no dtype for {self.dtype}")
        signed = self.words.view(_SIGNED_WORDS[self.words.dtype.itemsize])
        return torch.from_numpy(signed).view(names[self.dtype])

    def __repr__(self):
        return f"RawTensor({self.dtype}, shape={self.shape})"


def bfloat16(words):
    """A BF16 tensor from its uint16 words (the upper halves of the float32 values)."""
    return RawTensor(words, "BF16")


class Shard:
    """A block of a larger tensor: ``data`` holds elements [offsets, offsets + data.shape) of
    the global tensor of ``shape``. Saved, it is this rank's piece of that tensor (the ranks'
    pieces must tile it; identical pieces from several ranks are replicas). As a load target,
    that block is read into ``data``, whatever pieces the checkpoint was saved in.
    """

    __slots__ = ("data", "offsets", "shape")

    def __init__(self, data, offsets, shape):
        self.data = data
        self.offsets = tuple(int(o) for o in offsets)
        self.shape = tuple(int(s) for s in shape)

    def __repr__(self):
        return f"Shard(offsets={self.offsets}, shape={self.shape}, data={type(self.data).__name__})"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # Railyard's name: "F32", "BF16", ...
    shape: tuple


@dataclass(frozen=True)
class StepInfo:
    step: int
    state: str  # "committed", "incomplete" or "corrupt"
    bytes: int
    world_size: int  # 0 when unknown
    path: str
    detail: str  # why incomplete or corrupt
    latest: bool  # the `latest` file names this step


@dataclass(frozen=True)
class VerifyReport:
    step: int
    error: object  # None, or the exception for the first problem (file and byte range)
    warnings: tuple  # bad replicas covered by good ones
    fallback_step: object  # when not ok: the newest older step that verifies, or None
    bytes_verified: int

    @property
    def ok(self):
        return self.error is None


def _flatten(state, prefix="", out=None):
    out = {} if out is None else out
    if not isinstance(state, Mapping):
        raise TypeError(f"a state dict is a mapping, got {type(state).__name__}")
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state dict keys are strings, got {key!r} under '{prefix}'")
        name = prefix + key
        if isinstance(value, Mapping):
            _flatten(value, name + ".", out)
        elif name in out:
            raise ValueError(f"tensor '{name}' appears twice once nested dicts are flattened")
        else:
            out[name] = value
    return out


def _memory(name, value, writable):
    """(dtype name, shape, what _core takes as memory, the object to keep alive)."""
    if isinstance(value, RawTensor):
        value, dtype = value.words, value.dtype
        if not value.flags.c_contiguous:
            if writable:
                raise ValueError(f"tensor '{name}': cannot read into non-contiguous words")
            value = np.ascontiguousarray(value)
        return dtype, value.shape, value, value
    if isinstance(value, (np.ndarray, np.generic)):
        if writable and not isinstance(value, np.ndarray):
            raise ValueError(f"tensor '{name}': cannot read into a numpy scalar; pass an array")
        value = np.asarray(value)
        dtype = _FROM_NUMPY.get(value.dtype.str)
        if dtype is None:
            raise ValueError(
                f"tensor '{name}': numpy dtype {value.dtype} ({value.dtype.str}) is not one "
                f"Railyard stores: {', '.join(str(d) for d in _TO_NUMPY.values())} "
                "(little-endian), or bfloat16 as a RawTensor"
            )
        if not value.flags.c_contiguous:
            if writable:
                raise ValueError(f"tensor '{name}': cannot read into a non-contiguous array")
            value = np.ascontiguousarray(value)  # the one copy: Railyard stores row-major
        return dtype, value.shape, value, value
    if _is_tensor(value):
        torch = _torch_module()
        if value.device.type != "cpu":
            raise ValueError(f"tensor '{name}' is on {value.device}; pass CPU tensors (.cpu())")
        if value.layout != torch.strided:
            raise ValueError(f"tensor '{name}' is {value.layout}; only dense tensors are stored")
        dtype = _torch_dtypes(torch).get(value.dtype)
        if dtype is None:
            raise ValueError(f"tensor '{name}': torch dtype {value.dtype} is not one Railyard stores")
        value = value.detach()
        if not value.is_contiguous():
            if writable:
                raise ValueError(f"tensor '{name}': cannot read into a non-contiguous tensor")
            value = value.contiguous()
        nbytes = value.numel() * value.element_size()
        return dtype, tuple(value.shape), (value.data_ptr(), nbytes), value
    raise TypeError(
        f"tensor '{name}': {type(value).__name__} is not a numpy array, a CPU torch tensor, "
        "a RawTensor or a Shard"
    )


def _pieces(state):
    """The (name, dtype, shape, offsets, sizes, memory) tuples _core saves, and what they
    point into (kept alive by the caller for the duration of the save)."""
    pieces, keep = [], []
    for name, value in _flatten(state).items():
        if isinstance(value, Shard):
            dtype, sizes, memory, owner = _memory(name, value.data, writable=False)
            shape, offsets = builtins.list(value.shape), builtins.list(value.offsets)
            pieces.append((name, dtype, shape, offsets, builtins.list(sizes), memory))
        else:
            dtype, shape, memory, owner = _memory(name, value, writable=False)
            pieces.append((name, dtype, builtins.list(shape), [], [], memory))
        keep.append(owner)
    return pieces, keep


def _metadata(metadata):
    return {} if metadata is None else dict(metadata)


class Writer:
    """Saves steps into a checkpoint directory, synchronously (storage/checkpoint.h).

    With world_size > 1 this is one rank's writer: every rank creates one (a collective: it
    returns when all ranks have), with the same ``run_id``, which must differ from every
    earlier run's (e.g. f"{job_id}-{restart_count}"), and calls save with the same steps.
    The ranks agree through marker files in the directory, which they must all see.
    """

    def __init__(
        self,
        path,
        *,
        rank=0,
        world_size=1,
        run_id="",
        keep_last=0,
        io_threads=4,
        direct_io=False,
        agreement_timeout=600.0,
    ):
        self.path = os.fspath(path)
        self._core = _core.CheckpointWriter(
            self.path, rank, world_size, run_id, keep_last, io_threads, direct_io, agreement_timeout
        )

    def save(self, state, step, metadata=None):
        """Saves this rank's tensors as part of ``step``; returns once the step is committed
        on every rank, raises (nothing committed) otherwise. ``metadata``: str -> str."""
        pieces, keep = _pieces(state)
        self._core.save(step, pieces, _metadata(metadata))
        del keep

    @property
    def last_stats(self):
        """The last save: step, bytes, write/commit/total seconds, direct, warning."""
        return self._core.last_stats()


class SaveHandle:
    """One asynchronous save: ``wait()`` returns when it is committed (raising its error),
    ``done`` says whether its background write has finished."""

    def __init__(self, saver, step):
        self._saver = saver
        self.step = step

    @property
    def done(self):
        # The saver's last finished save (storage/async_saver.h AsyncSaverStats::last_save).
        return self._saver.stats()["last_save"]["step"] == self.step

    def wait(self):
        """Waits for the save; raises its error (or that of an earlier save nobody collected)."""
        self._saver.wait()

    @property
    def stats(self):
        return self._saver.stats()

    def __repr__(self):
        return f"SaveHandle(step={self.step}, done={self.done})"


class AsyncWriter:
    """Saves that stall the caller only for a copy into staging (storage/async_saver.h).

    ``save`` copies the tensors and returns a SaveHandle; a background thread writes and
    commits them, so the tensors may change as soon as it returns. One save is in flight at a
    time: the next ``save`` first waits for the previous one, and raises its error if it
    failed. The ranks and ``run_id`` are as for Writer.
    """

    def __init__(
        self,
        path,
        *,
        rank=0,
        world_size=1,
        run_id="",
        keep_last=0,
        io_threads=4,
        direct_io=False,
        agreement_timeout=600.0,
        max_staging_bytes=64 << 30,
        copy_threads=0,
    ):
        self.path = os.fspath(path)
        writer = _core.CheckpointWriter(
            self.path, rank, world_size, run_id, keep_last, io_threads, direct_io, agreement_timeout
        )
        self._core = _core.AsyncSaver(writer, max_staging_bytes, copy_threads)

    def save(self, state, step, metadata=None):
        pieces, keep = _pieces(state)
        self._core.save_async(step, pieces, _metadata(metadata))
        del keep
        return SaveHandle(self._core, step)

    def wait(self):
        """Waits for the save in flight; raises its error."""
        self._core.wait()

    @property
    def stats(self):
        return self._core.stats()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.wait()


def save(state, path, step, metadata=None, **writer_options):
    """Saves ``state`` as ``step`` of the checkpoint directory ``path`` (created), returning
    when it is committed. ``writer_options`` are Writer's (rank, world_size, run_id, ...);
    with several ranks, every rank calls save, and each call needs a new run_id."""
    Writer(path, **writer_options).save(state, step, metadata)


def save_async(state, path, step, metadata=None, **writer_options):
    """save in the background: returns a SaveHandle once the tensors are copied."""
    return AsyncWriter(path, **writer_options).save(state, step, metadata)


class Checkpoint:
    """One committed step, opened for reading (storage/checkpoint_reader.h).

    Without ``step``: the newest step that opens, skipping newer ones that are incomplete or
    corrupt (``fallback_notes`` says which and why). With ``verify`` (the default) every
    checksum is checked on open; otherwise each piece is checked when first read.
    """

    def __init__(self, path, step=None, *, verify=True, io_threads=4, direct_io=False):
        self.path = os.fspath(path)
        self._core = _core.CheckpointReader(self.path, step, verify, io_threads, direct_io)
        self.tensors = {
            name: TensorInfo(name, dtype, tuple(shape)) for name, dtype, shape in self._core.tensors()
        }

    step = property(lambda self: self._core.step)
    step_dir = property(lambda self: self._core.step_dir)
    world_size = property(lambda self: self._core.world_size)
    created = property(lambda self: self._core.created)
    metadata = property(lambda self: self._core.metadata)
    fallback_notes = property(lambda self: self._core.fallback_notes)

    def _info(self, name):
        info = self.tensors.get(name)
        if info is None:
            raise _core.NotFoundError(f"step {self.step} of '{self.path}' has no tensor '{name}'")
        return info

    def read(self, name, offsets=None, sizes=None, *, out=None):
        """The block [offsets, offsets + sizes) of tensor ``name`` (the whole tensor by
        default), read into ``out`` when given (a numpy array, CPU torch tensor or RawTensor
        of the block's shape and dtype), else into a new numpy array (a RawTensor for dtypes
        numpy lacks). Returns what it read into."""
        info = self._info(name)
        offsets = [0] * len(info.shape) if offsets is None else [int(o) for o in offsets]
        if out is None:
            sizes = builtins.list(info.shape) if sizes is None else [int(s) for s in sizes]
            out = _empty(info.dtype, sizes)
        dtype, shape, memory, keep = _memory(name, out, writable=True)
        if sizes is None:
            sizes = builtins.list(shape)
        sizes = [int(s) for s in sizes]
        if dtype != info.dtype or tuple(shape) != tuple(sizes):
            raise ValueError(
                f"tensor '{name}' is {info.dtype} {builtins.list(info.shape)} in step "
                f"{self.step}; the block {sizes} is read into {dtype} {builtins.list(shape)}"
            )
        self._core.read(name, offsets, sizes, memory)
        del keep
        return out

    def load(self, state=None, *, torch=False):
        """Without ``state``: every tensor, {name: numpy array} (RawTensor for BF16), or torch
        tensors with ``torch=True``. With ``state`` (nested or flat; numpy arrays, CPU torch
        tensors, RawTensors or Shards as targets): each target is filled in place, a Shard
        with its block of the saved tensor, and ``state`` is returned."""
        if state is None:
            out = {name: self.read(name) for name in self.tensors}
            if torch:
                out = {name: _as_torch(name, value) for name, value in out.items()}
            return out
        for name, target in _flatten(state).items():
            info = self._info(name)
            if isinstance(target, Shard):
                if target.shape != info.shape:
                    raise ValueError(
                        f"tensor '{name}' has shape {builtins.list(info.shape)} in step "
                        f"{self.step}; the Shard says {builtins.list(target.shape)}"
                    )
                self.read(name, target.offsets, None, out=target.data)
            else:
                self.read(name, None, info.shape, out=target)
        return state

    def verify(self):
        """Reads every piece and checks its checksum; returns warnings about bad replicas
        covered by good ones, raises CorruptCheckpointError otherwise."""
        return self._core.verify_all()

    def __repr__(self):
        return f"Checkpoint('{self.path}', step={self.step}, tensors={len(self.tensors)})"


def _empty(dtype, sizes):
    if dtype in _TO_NUMPY:
        return np.empty(sizes, _TO_NUMPY[dtype])
    return RawTensor(np.empty(sizes, _WORDS[_core.dtype_size(dtype)]), dtype)


def _as_torch(name, value):
    import torch

    if isinstance(value, RawTensor):
        return value.to_torch()
    dtype = _FROM_NUMPY[value.dtype.str]
    names = {n: d for d, n in _torch_dtypes(torch).items()}
    if dtype not in names:
        raise ValueError(
            f"tensor '{name}' is {dtype}, which torch {torch.__version__} has no dtype for; "
            "load it without torch=True"
        )
    if value.dtype.kind == "u" and value.dtype.itemsize > 1:
        # torch.from_numpy takes no uint16/32/64 arrays: the same words, signed, then viewed.
        signed = value.view(_SIGNED_WORDS[value.dtype.itemsize])
        return torch.from_numpy(signed).view(names[dtype])
    return torch.from_numpy(value)


def open(path, step=None, **options):  # noqa: A001 (railyard.checkpoint.open, like io.open)
    """A Checkpoint: the newest valid step of ``path``, or ``step``."""
    return Checkpoint(path, step, **options)


def load(path, state=None, *, step=None, torch=False, verify=True):
    """Checkpoint(path, step).load(state, torch=torch): the newest valid step by default."""
    return Checkpoint(path, step, verify=verify).load(state, torch=torch)


def verify(path, step=None, *, raise_on_error=True):
    """Verifies every checksum of ``step`` (default: the newest step directory). Returns a
    VerifyReport; when the step is bad and ``raise_on_error``, raises its error (a
    CorruptCheckpointError for a bad byte) with the report as ``error.report``."""
    r = _core.verify_checkpoint(os.fspath(path), step)
    report = VerifyReport(
        r["step"], r["error"], tuple(r["warnings"]), r["fallback_step"], r["bytes_verified"]
    )
    if report.error is not None and raise_on_error:
        report.error.report = report
        raise report.error
    return report


def list(path, *, verify=False):  # noqa: A001 (railyard.checkpoint.list)
    """Every step of ``path``, ascending, with its state: committed, incomplete or corrupt
    (with ``verify``, checksum mismatches count as corrupt)."""
    return [StepInfo(**s) for s in _core.list_checkpoints(os.fspath(path), verify)]
