"""Railyard from Python: checkpoints, packed training data, topology, placement, progress.

The package translates Railyard's C++ libraries (the extension ``railyard._core``); it holds
no logic of its own. Its modules load on first use, so ``import railyard`` is quick and never
imports torch:

    railyard.checkpoint   save/load state dicts of numpy arrays and CPU torch tensors
    railyard.data         pack samples; a resumable reader (a torch IterableDataset with torch)
    railyard.topology     load a topology file in any supported format, export it
    railyard.place        place a gang on a topology
    railyard.progress     heartbeat() and step(n) for the launcher's supervisor

Errors: every failure Railyard reports is raised as a subclass of ``railyard.Error`` whose
``code`` names the Status code, with the C++ message. NOT_FOUND is also a FileNotFoundError,
INVALID_ARGUMENT a ValueError, DATA_LOSS (a corrupt checkpoint or data shard) a
CorruptCheckpointError, and every other code a RuntimeError. docs/python.md has the table.
"""

import importlib as _importlib

from railyard._core import (
    AbortedError,
    AlreadyExistsError,
    CorruptCheckpointError,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
    UnimplementedError,
)

_SUBMODULES = ("checkpoint", "data", "topology", "place", "progress")

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "CorruptCheckpointError",
    "DeadlineExceededError",
    "Error",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnavailableError",
    "UnimplementedError",
    *_SUBMODULES,
]


def __getattr__(name):
    # PEP 562: railyard.checkpoint and the others are imported when first named, so that
    # `import railyard` costs only the extension (railyard.data imports torch where present).
    if name in _SUBMODULES:
        return _importlib.import_module(f"railyard.{name}")
    raise AttributeError(f"module 'railyard' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
