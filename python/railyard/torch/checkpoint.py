"""Checkpoints of a DDP job's state: every rank saves a disjoint share of the replicated
tensors, so a save costs each rank about 1/N of the bytes, and any world size loads it.

    state = {"model": ddp, "optimizer": opt, "step": step}
    railyard.torch.save(state, "/ckpt", step)                      # committed on every rank
    handle = railyard.torch.save(state, "/ckpt", step, asynchronous=True)
    ...                                                            # train on: already copied
    railyard.torch.wait()                                          # or handle.wait()
    state = railyard.torch.load("/ckpt", {"model": ddp, "optimizer": opt})
    start = state["step"]

The state is a tree: dicts (str or int keys), lists, tuples, tensors (torch or numpy), plain
int/float/str/bool/None, and objects with state_dict()/load_state_dict() (an nn.Module, a
DistributedDataParallel's module, an Optimizer, an LR scheduler, a railyard.data.Dataset).
Its tensors are saved through railyard.checkpoint (commit protocol, checksums, Lustre
striping, fallback to the newest valid step: docs/storage.md); the tree itself, with the
tensors as references by name, is a JSON "skeleton" in the step's metadata under
SKELETON_KEY, so a load rebuilds the same tree with the same key types.

The state is taken to be replicated, as DDP keeps it: every rank passes the same tree with
the same values, and each tensor is saved from whichever rank owns that share of it.
Values that differ between ranks (a per-rank RNG state) keep one rank's value.

Thread-safety: save, wait and load from one thread at a time (the training loop).
docs/torch.md has the reference.
"""

import atexit
import datetime
import hashlib
import json
import os
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import torch
import torch.distributed as dist

import railyard
import railyard.checkpoint as ckpt
from railyard.checkpoint import SaveHandle

__all__ = ["SKELETON_KEY", "SaveHandle", "load", "plan_shares", "save", "wait"]

# The step's metadata key holding the tree (JSON); rank 0 writes it. Every rank writes the
# SHA-256 of its tree and tensor shapes under DIGEST_KEY, so ranks that passed different trees
# make the commit fail (the writer refuses one metadata key with two values, naming both
# ranks) instead of saving a mix of them.
SKELETON_KEY = "railyard.torch.skeleton"
DIGEST_KEY = "railyard.torch.tree_sha256"
_FORMAT = 1

# A tensor of at least this many bytes, with at least one row per rank, is split by rows so
# each rank writes 1/N of it; smaller ones go whole to one rank each. Below a megabyte a
# split saves little and adds a piece (a 4 KiB-aligned extent and a checksum) per rank.
SPLIT_BYTES = 1 << 20

_PLAIN = (bool, int, float, str, type(None))


# ---- the tree -> tensors and a skeleton ----


def _where(path):
    return "state" + "".join(f"[{k!r}]" for k in path)


def _unwrap(module):
    # DDP and DataParallel hold the model as .module; their own state_dict would prefix every
    # key with "module.", which a plain model of the same architecture could not load.
    parallel = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while isinstance(module, parallel):
        module = module.module
    return module


def _is_stateful(value):
    # An instance's bound methods; a class has them as plain functions, which need a self.
    return (not isinstance(value, type) and callable(getattr(value, "state_dict", None))
            and callable(getattr(value, "load_state_dict", None)))


class _Walk:
    """Turns a state tree into a skeleton and {name: tensor}, naming each tensor by its key
    path ("model.0.weight", "optimizer.state.3.exp_avg") made unique with a suffix."""

    def __init__(self):
        self.tensors = {}  # name -> torch tensor or numpy array (np.generic made 0-d)
        self._by_memory = {}  # the memory a tensor views -> its name: tied weights once
        self._open = set()  # ids of the containers on the current path: cycles

    def node(self, value, path):
        if type(value) in _PLAIN:
            return value
        if isinstance(value, torch.Tensor):
            return {"tensor": self._tensor(value, path)}
        if isinstance(value, np.ndarray):
            return {"array": self._array(value, path)}
        if isinstance(value, np.generic):
            return {"scalar": self._array(np.asarray(value), path)}
        if isinstance(value, torch.nn.Module):
            sd = _unwrap(value).state_dict()
            out = {"module": self._container(sd, path)}
            versions = getattr(sd, "_metadata", None)
            if versions is not None and _is_json(versions):
                # load_state_dict hands each submodule its version (BatchNorm reads it).
                out["versions"] = dict(versions)
            return out
        if isinstance(value, torch.optim.Optimizer):
            return {"optimizer": self._container(value.state_dict(), path)}
        if isinstance(value, (Mapping, list, tuple)):
            return self._container(value, path)
        if _is_stateful(value):
            return {"object": self._container(value.state_dict(), path)}
        raise TypeError(
            f"{_where(path)}: {_describe(value)} is not something railyard.torch.save stores: "
            "a tensor, a numpy array, an nn.Module, an Optimizer, an object with state_dict() "
            "and load_state_dict(), a dict, list or tuple of these, or int, float, str, bool, "
            "None"
        )

    def _container(self, value, path):
        if id(value) in self._open:
            raise ValueError(f"{_where(path)} contains itself")
        self._open.add(id(value))
        try:
            if isinstance(value, Mapping):
                items = []
                for key, item in value.items():
                    if type(key) not in (str, int):
                        raise TypeError(
                            f"{_where(path)}: key {key!r} is a {type(key).__name__}; "
                            "railyard.torch.save keeps str and int keys"
                        )
                    items.append([key, self.node(item, path + (key,))])
                return {"dict": items}
            if not isinstance(value, (list, tuple)):
                # A state_dict() that returned something else.
                return self.node(value, path)
            kind = "tuple" if isinstance(value, tuple) else "list"
            if kind == "tuple" and type(value) is not tuple:
                raise TypeError(
                    f"{_where(path)}: {type(value).__name__} (a named tuple or other tuple "
                    "subclass) would load as a plain tuple; pass a tuple or a dict"
                )
            return {kind: [self.node(item, path + (i,)) for i, item in enumerate(value)]}
        finally:
            self._open.discard(id(value))

    def _name(self, path):
        base = ".".join(str(k) for k in path) or "tensor"
        name, n = base, 1
        while name in self.tensors:
            n += 1
            name = f"{base}~{n}"
        return name

    def _tensor(self, t, path):
        if t.layout != torch.strided:
            raise ValueError(f"{_where(path)}: a {t.layout} tensor; only dense tensors are saved")
        if t.dtype not in _TORCH_DTYPES:
            raise ValueError(
                f"{_where(path)}: dtype {t.dtype} is not one Railyard stores "
                f"({', '.join(sorted(str(d) for d in _TORCH_DTYPES))})"
            )
        key = None
        if t.numel() > 0:
            key = ("torch", str(t.device), t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
            if key in self._by_memory:
                return self._by_memory[key]
        name = self._name(path)
        self.tensors[name] = t.detach()
        if key is not None:
            self._by_memory[key] = name
        return name

    def _array(self, a, path):
        if a.dtype.str not in ckpt._FROM_NUMPY:
            raise ValueError(
                f"{_where(path)}: numpy dtype {a.dtype} ({a.dtype.str}) is not one Railyard "
                "stores (bool and little-endian integers and floats of 1 to 8 bytes)"
            )
        name = self._name(path)
        self.tensors[name] = a
        return name


def _describe(value):
    kind = type(value)
    if kind.__module__ == "builtins":
        return f"a {kind.__qualname__}"
    return f"a {kind.__module__}.{kind.__qualname__}"


def _is_json(value):
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# torch dtype -> Railyard's name, for the dtypes this torch has.
_TORCH_DTYPES = ckpt._torch_dtypes(torch)


# ---- who saves what ----


def _nbytes(value):
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    return value.nbytes


def plan_shares(tensors, world_size):
    """Which rank saves which part of each tensor: {name: None (split by rows among all
    ranks) or the rank that saves it whole}. ``tensors``: {name: (shape, nbytes)}.

    A pure function of names, shapes and sizes, so every rank works out the same plan without
    talking to the others. Tensors of SPLIT_BYTES or more with at least world_size rows are
    split by rows (dim 0), as evenly as rows allow; the others go whole, largest first, to the
    rank that has the fewest bytes so far (lowest rank on a tie), which leaves every rank
    within one small tensor of 1/N of the bytes.
    """
    plan, load = {}, [0] * world_size
    whole = []
    for name, (shape, nbytes) in tensors.items():
        if world_size > 1 and nbytes >= SPLIT_BYTES and len(shape) > 0 and shape[0] >= world_size:
            plan[name] = None
            rows = shape[0]
            for r in range(world_size):
                start, stop = _rows(rows, r, world_size)
                load[r] += nbytes * (stop - start) // rows
        else:
            whole.append((nbytes, name))
    for nbytes, name in sorted(whole, key=lambda e: (-e[0], e[1])):
        r = min(range(world_size), key=lambda q: (load[q], q))
        plan[name] = r
        load[r] += nbytes
    return plan


def _rows(rows, rank, world_size):
    return rows * rank // world_size, rows * (rank + 1) // world_size


def _share(tensors, plan, rank, world_size):
    """This rank's pieces for railyard.checkpoint: whole tensors and Shards of rows. Tensors
    on a device are copied to host here, this rank's share only."""
    mine = {}
    for name, value in tensors.items():
        owner = plan[name]
        if owner is None:
            start, stop = _rows(value.shape[0], rank, world_size)
            mine[name] = ckpt.Shard(_host(value[start:stop]), (start,) + (0,) * (value.ndim - 1),
                                    value.shape)
        elif owner == rank:
            mine[name] = _host(value)
    return mine


def _host(value):
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.cpu()
    return value


# ---- writers, one per checkpoint directory and process ----


class _Entry:
    __slots__ = ("writer", "asynchronous", "options", "pid")

    def __init__(self, writer, asynchronous, options):
        self.writer = writer
        self.asynchronous = asynchronous
        self.options = options
        self.pid = os.getpid()


_writers = {}  # realpath -> _Entry
_lock = threading.Lock()


def _rank_and_world():
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _new_run_id(world_size):
    """A run id no earlier writer of this directory used, the same on every rank: the ranks
    commit through marker files named by it (railyard.checkpoint.Writer)."""
    run_id = uuid.uuid4().hex
    if world_size > 1:
        box = [run_id]
        dist.broadcast_object_list(box, src=0)
        run_id = box[0]
    return run_id


def _writer(path, asynchronous, keep_last, timeout, rank, world_size):
    key = os.path.realpath(path)
    options = (rank, world_size, keep_last, timeout)
    entry = _writers.get(key)
    if entry is not None and entry.pid != os.getpid():
        entry = None  # inherited through fork: its threads are not in this process
    if entry is not None and (entry.asynchronous, entry.options) == (asynchronous, options):
        return entry.writer
    if entry is not None and entry.asynchronous:
        # A new writer's rank 0 removes unfinished saves (.tmp-*): finish this one first.
        entry.writer.wait()
    _writers.pop(key, None)
    kind = ckpt.AsyncWriter if asynchronous else ckpt.Writer
    writer = kind(path, rank=rank, world_size=world_size, run_id=_new_run_id(world_size),
                  keep_last=keep_last, agreement_timeout=timeout)
    _writers[key] = _Entry(writer, asynchronous, options)
    return writer


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


# ---- the API ----


def save(state, path, step, *, asynchronous=False, metadata=None, keep_last=0, timeout=600.0):
    """Saves ``state`` as ``step`` of the checkpoint directory ``path``; every rank of the
    job calls it with the same tree, step and options.

    ``state``: a dict (see the module's docstring for what it may hold). Each rank writes its
    share of the tensors (plan_shares); the step is committed only when every rank's share is
    written, and a step that never commits leaves the previous ones as they were.
    ``metadata``: str -> str, the same on every rank, kept with the step. ``keep_last``: keep
    only that many newest committed steps (0: all). ``timeout``: seconds (or a timedelta) a
    rank waits for the others at the commit before the save fails naming the missing ranks.

    The first save into ``path`` in this process opens a writer (a collective: with
    torch.distributed initialized the ranks agree on a new run id through it); later saves
    reuse it, so a save is no collective beyond the commit. Changing ``asynchronous``,
    ``keep_last`` or ``timeout`` opens a new writer, after the save in flight.

    Synchronous (default): returns when the step is committed on every rank, with this
    rank's statistics (a dict: step, bytes, write/commit/total seconds). Asynchronous:
    returns a SaveHandle once this rank's share is copied, so the caller may change the
    tensors at once; a background thread writes and commits it. The next save waits for it
    first; ``wait()`` or the handle's ``wait()`` returns when it is committed, and either
    (or the next save) raises its error.

    Raises TypeError or ValueError naming the key path for a value it cannot store,
    railyard.Error for storage failures (AbortedError naming the rank that failed,
    DeadlineExceededError naming the ranks that never came, AlreadyExistsError for a step
    that is committed already).
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"railyard.torch.save takes a dict of state, got {_describe(state)}")
    metadata = {} if metadata is None else dict(metadata)
    for key, value in metadata.items():
        if type(key) is not str or type(value) is not str:
            raise TypeError(f"metadata maps str to str; got {key!r}: {value!r}")
        if key in (SKELETON_KEY, DIGEST_KEY):
            raise ValueError(f"metadata key {key!r} is railyard.torch's own")
    walk = _Walk()
    tree = walk.node(state, ())
    specs = {name: (tuple(t.shape), _nbytes(t)) for name, t in walk.tensors.items()}
    skeleton = json.dumps({"format": _FORMAT, "tree": tree}, separators=(",", ":"))
    rank, world_size = _rank_and_world()
    layout = json.dumps(
        [skeleton, [[n, list(s), _dtype_name(walk.tensors[n])] for n, (s, _) in specs.items()]]
    )
    metadata[DIGEST_KEY] = hashlib.sha256(layout.encode()).hexdigest()
    if rank == 0:
        metadata[SKELETON_KEY] = skeleton
    mine = _share(walk.tensors, plan_shares(specs, world_size), rank, world_size)
    with _lock:
        writer = _writer(os.fspath(path), asynchronous, int(keep_last), _seconds(timeout), rank,
                         world_size)
        if asynchronous:
            return writer.save(mine, step, metadata)
        writer.save(mine, step, metadata)
        return writer.last_stats


def _dtype_name(value):
    if isinstance(value, torch.Tensor):
        return _TORCH_DTYPES[value.dtype]
    return ckpt._FROM_NUMPY[value.dtype.str]


def wait(path=None):
    """Waits for the asynchronous save in flight into ``path`` (every path when None), and
    raises its error. Returns at once where none is in flight; no collective, so one rank
    may call it alone (before it exits, say)."""
    with _lock:
        if path is None:
            entries = list(_writers.values())
        else:
            entry = _writers.get(os.path.realpath(os.fspath(path)))
            entries = [] if entry is None else [entry]
        for entry in entries:
            if entry.asynchronous and entry.pid == os.getpid():
                entry.writer.wait()


@atexit.register
def _wait_at_exit():
    # An interpreter that exits normally finishes its saves in flight rather than dropping
    # them; there is nobody left to raise to, so their errors go to stderr.
    for key, entry in list(_writers.items()):
        if entry.asynchronous and entry.pid == os.getpid():
            try:
                entry.writer.wait()
            except Exception as e:  # noqa: BLE001 (reported, not swallowed)
                print(f"railyard.torch: the asynchronous save into '{key}' failed: {e}",
                      file=sys.stderr)
    _writers.clear()


def load(path, state=None, *, step=None):
    """Loads ``step`` of ``path`` (default: the newest step that verifies, skipping newer ones
    that are incomplete or corrupt) and returns the saved tree as a dict, tensors as CPU
    torch tensors (numpy arrays where numpy arrays were saved), modules and optimizers as
    their state dicts, so ``load(path)["step"]`` is what was saved as "step".

    With ``state`` (a dict like the one saved): each value that can be filled is, from the
    saved value under the same key: an nn.Module (a DDP's module) and any object with
    load_state_dict() by load_state_dict, a tensor or numpy array by an in-place copy
    (same shape and dtype), dicts, lists and tuples item by item; plain values are left
    alone (read them from the result).

    Every rank reads whole tensors, whatever world size saved them. No collective: each rank
    may load alone. Raises railyard.NotFoundError when there is no checkpoint or no such
    step, CorruptCheckpointError when no step is valid (or ``step`` is not),
    FailedPreconditionError for a step railyard.torch.save did not write, ValueError naming
    the key path where ``state`` does not match what was saved.
    """
    if state is not None and not isinstance(state, Mapping):
        raise TypeError(f"railyard.torch.load fills a dict of state, got {_describe(state)}")
    # One pass over the bytes: unverified, the reader checks each piece's checksum as it reads
    # it whole (checkpoint_reader.h), which loading every tensor does. Only when that finds a
    # bad byte in the newest step is it opened again verified, which skips to the newest step
    # that verifies.
    try:
        return _load(ckpt.open(path, step, verify=False), state)
    except railyard.CorruptCheckpointError:
        if step is not None:
            raise
    return _load(ckpt.open(path, None, verify=True), state)


def _load(c, state):
    text = c.metadata.get(SKELETON_KEY)
    if text is None:
        raise railyard.FailedPreconditionError(
            f"step {c.step} of '{c.path}' was not saved by railyard.torch.save (its metadata "
            f"has no {SKELETON_KEY!r}); read its tensors with railyard.checkpoint.load"
        )
    try:
        doc = json.loads(text)
        fmt = doc["format"]
        tree = doc["tree"]
    except (ValueError, TypeError, KeyError) as e:
        raise railyard.CorruptCheckpointError(
            f"step {c.step} of '{c.path}': metadata {SKELETON_KEY!r} is not railyard.torch's "
            f"skeleton: {e}"
        ) from None
    if fmt != _FORMAT:
        raise railyard.FailedPreconditionError(
            f"step {c.step} of '{c.path}' has skeleton format {fmt}; this railyard.torch "
            f"reads format {_FORMAT}"
        )
    result = _Rebuild(c).node(tree, ())
    if not isinstance(result, dict):
        raise railyard.CorruptCheckpointError(
            f"step {c.step} of '{c.path}': the saved tree is not a dict")
    if state is not None:
        _fill(state, result, (), c)
    return result


class _Rebuild:
    """The skeleton back into a tree, reading each tensor once (tied ones stay shared)."""

    def __init__(self, checkpoint):
        self._c = checkpoint
        self._read = {}

    def node(self, node, path):
        if not isinstance(node, (dict, list)):
            return node
        if not isinstance(node, dict) or len(node) == 0:
            raise self._bad(path, node)
        if "tensor" in node:
            return self._tensor(node["tensor"], "torch", path)
        if "array" in node:
            return self._tensor(node["array"], "numpy", path)
        if "scalar" in node:
            return self._tensor(node["scalar"], "numpy", path)[()]
        if "dict" in node:
            return {self._key(k, path): self.node(v, path + (k,)) for k, v in node["dict"]}
        if "list" in node:
            return [self.node(v, path + (i,)) for i, v in enumerate(node["list"])]
        if "tuple" in node:
            return tuple(self.node(v, path + (i,)) for i, v in enumerate(node["tuple"]))
        if "module" in node:
            sd = OrderedDict(self.node(node["module"], path))
            if "versions" in node:
                sd._metadata = OrderedDict(node["versions"])
            return sd
        if "optimizer" in node:
            return self.node(node["optimizer"], path)
        if "object" in node:
            return self.node(node["object"], path)
        raise self._bad(path, node)

    def _key(self, key, path):
        if type(key) not in (str, int):
            raise self._bad(path, key)
        return key

    def _tensor(self, name, kind, path):
        if name not in self._read:
            if name not in self._c.tensors:
                raise railyard.CorruptCheckpointError(
                    f"step {self._c.step} of '{self._c.path}': {_where(path)} is tensor "
                    f"'{name}', which the step does not hold")
            value = self._c.read(name)
            if kind == "torch":
                value = ckpt._as_torch(name, value)
            self._read[name] = value
        return self._read[name]

    def _bad(self, path, node):
        return railyard.CorruptCheckpointError(
            f"step {self._c.step} of '{self._c.path}': the skeleton at {_where(path)} is "
            f"{str(node)[:80]!r}, which railyard.torch does not write")


def _fill(target, saved, path, c):
    where = f"{_where(path)} (step {c.step} of '{c.path}')"
    if isinstance(target, torch.nn.Module) or (
        not isinstance(target, (torch.Tensor, np.ndarray, Mapping, list, tuple))
        and _is_stateful(target)
    ):
        if not isinstance(saved, Mapping):
            raise ValueError(f"{where}: saved as {_describe(saved)}; load_state_dict needs a dict")
        obj = _unwrap(target) if isinstance(target, torch.nn.Module) else target
        obj.load_state_dict(saved)
    elif isinstance(target, torch.Tensor):
        if isinstance(saved, np.ndarray):
            saved = torch.from_numpy(saved)
        _check_tensor(target, saved, where, "torch tensor")
        with torch.no_grad():
            target.copy_(saved)
    elif isinstance(target, np.ndarray):
        if isinstance(saved, torch.Tensor):
            if saved.dtype == torch.bfloat16:
                raise ValueError(f"{where}: saved as a bfloat16 tensor; numpy has no bfloat16")
            saved = saved.numpy()
        _check_tensor(target, saved, where, "numpy array")
        np.copyto(target, saved)
    elif isinstance(target, Mapping):
        if not isinstance(saved, Mapping):
            raise ValueError(f"{where}: expected a dict, the step holds {_describe(saved)}")
        for key, value in target.items():
            if key not in saved:
                keys = ", ".join(repr(k) for k in list(saved)[:10])
                raise ValueError(f"{where} has no key {key!r} (it has {keys})")
            _fill(value, saved[key], path + (key,), c)
    elif isinstance(target, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(target):
            raise ValueError(
                f"{where}: expected a sequence of {len(target)}, the step holds "
                f"{_describe(saved)}" + (f" of {len(saved)}" if isinstance(saved, (list, tuple))
                                        else ""))
        for i, (value, item) in enumerate(zip(target, saved)):
            _fill(value, item, path + (i,), c)
    # Anything else (int, str, None, ...) cannot be filled in place: the caller reads it from
    # the tree load returns.


def _check_tensor(target, saved, where, kind):
    if not isinstance(saved, (torch.Tensor, np.ndarray)):
        raise ValueError(f"{where}: expected a tensor, the step holds {_describe(saved)}")
    if tuple(target.shape) != tuple(saved.shape) or target.dtype != saved.dtype:
        raise ValueError(
            f"{where}: the step holds {saved.dtype} {list(saved.shape)}; the {kind} given is "
            f"{target.dtype} {list(target.shape)}")
