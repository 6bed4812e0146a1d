"""Railyard for PyTorch: the torch.distributed backend ``railyard`` and checkpoints of a DDP
job's state on Railyard's storage (docs/torch.md).

    import railyard.torch                      # registers the backend
    torch.distributed.init_process_group("railyard", timeout=timedelta(seconds=30))
    model = DistributedDataParallel(model)
    ...
    railyard.torch.save({"model": model.module, "optimizer": opt, "step": step}, ckpt, step)
    state = railyard.torch.load(ckpt, {"model": model.module, "optimizer": opt})

The backend is a c10d ProcessGroup over Railyard's host-memory collectives (the extension
``railyard._torch``): CPU tensors; a killed or stopped rank makes every other rank's
operation raise a RuntimeError naming the operation, the rank and its host within the
timeout plus about a second. GPU tensors belong to NCCL.

Importing this module imports torch; ``import railyard`` alone does not.
"""

import torch.distributed as _dist

try:
    from railyard import _torch
except ImportError as e:  # the build found no libtorch (python/torch_backend/CMakeLists.txt)
    raise ImportError(
        "railyard.torch needs the extension railyard._torch, which this build of Railyard "
        f"does not have (built without libtorch-dev?): {e}"
    ) from e

from railyard.torch.checkpoint import SaveHandle, load, save, wait

__all__ = ["BACKEND", "SaveHandle", "load", "save", "wait"]

BACKEND = "railyard"


def _create_process_group(options, pg_options=None):
    # torch.distributed's extended creator API (c10d::DistributedBackendOptions): the group's
    # store, rank, size, timeout, name and global ranks, handed over as they are.
    return _torch.create_process_group(
        options.store,
        options.group_rank,
        options.group_size,
        options.timeout.total_seconds(),
        str(options.group_id),
        list(options.global_ranks_in_group),
    )


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
