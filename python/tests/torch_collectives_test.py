"""The torch.distributed backend "railyard": every operation on every dtype, in real rank
processes joined through env:// as under torchrun, at a power-of-two world size and at one
that is not (python/tests/torch_ranks.py holds what each rank checks)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed (Debian package python3-torch)")

from ranks import run_ranks  # noqa: E402
import torch_ranks  # noqa: E402


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_operation_on_every_dtype(world_size):
    run_ranks(torch_ranks.collectives, world_size, torch_ranks.free_port())


def test_import_registers_the_backend_once():
    import torch.distributed as dist

    import railyard.torch

    assert "RAILYARD" in dist.Backend._plugins
    import importlib

    importlib.reload(railyard.torch)  # a second registration would assert inside torch
    assert railyard.torch.BACKEND == "railyard"
