"""torch.distributed ranks for the backend's tests: init() joins a process group the way a
script under torchrun does (env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), and the
functions below are what the ranks run (module-level, so that spawn can import them).
run_ranks (ranks.py) starts them and bounds them in time."""

import datetime
import os
import signal
import socket
import sys
import time

import numpy as np


def free_port():
    """A TCP port on loopback that nothing listens on now (torch's store binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(rank, world_size, port, backend, timeout_s=30.0):
    """Joins the default process group as torchrun's environment would have it."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo: loopback, not the host's NIC
    import torch.distributed as dist

    if backend == "railyard":
        import railyard.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return dist


# The dtypes each kind of operation is checked with: reductions on what both torch and
# Railyard reduce, data movement on every dtype (as bytes where Railyard has no such type).
REDUCE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8")
MOVE_DTYPES = REDUCE_DTYPES + ("bool", "int8", "int16", "complex64")


def _values(torch, dtype, n, rank):
    """Small integers, exact in every dtype: element i is (i % 7) + rank."""
    t = torch.arange(n, dtype=torch.int64) % 7 + rank
    if dtype == torch.bool:
        return (t % 2).to(torch.bool)
    return t.to(dtype)


def collectives(rank, world_size, port):
    """Every operation of the backend on every dtype it takes, checked against values worked
    out here; raises AssertionError naming the operation and dtype on a wrong result."""
    import torch

    dist = init(rank, world_size, port, "railyard")
    w = world_size
    for name in REDUCE_DTYPES:
        dtype = getattr(torch, name)
        for n in (0, 1, 1000, 300_001):  # empty, one element, small, several chunks
            base = _values(torch, dtype, n, 0).to(torch.int64)
            t = _values(torch, dtype, n, rank)
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            want = (base * w + w * (w - 1) // 2).to(dtype)
            assert torch.equal(t, want), f"allreduce SUM {name} n={n}: {t[:8]} != {want[:8]}"
        small = 13
        base = _values(torch, dtype, small, 0)
        for op, want in (
            (dist.ReduceOp.MIN, base),
            (dist.ReduceOp.MAX, (base.to(torch.int64) + w - 1).to(dtype)),
            (dist.ReduceOp.PRODUCT, torch.full((small,), 2 ** ((w + 1) // 2)).to(dtype)),
        ):
            t = (torch.full((small,), 2 if rank % 2 == 0 else 1).to(dtype)
                 if op == dist.ReduceOp.PRODUCT else _values(torch, dtype, small, rank))
            dist.all_reduce(t, op=op)
            assert torch.equal(t, want), f"allreduce {op} {name}: {t} != {want}"
        if dtype.is_floating_point:
            t = torch.full((small,), float(2 * rank), dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            assert torch.equal(t, torch.full((small,), float(w - 1), dtype=dtype)), \
                f"allreduce AVG {name}: {t}"
        # reduce to a root other than 0: only the root's tensor changes.
        t = _values(torch, dtype, small, rank)
        dist.reduce(t, dst=w - 1, op=dist.ReduceOp.SUM)
        want = ((base.to(torch.int64) * w + w * (w - 1) // 2).to(dtype) if rank == w - 1
                else _values(torch, dtype, small, rank))
        assert torch.equal(t, want), f"reduce {name} on rank {rank}: {t}"
        # reduce_scatter: block r of the sum lands on rank r.
        ins = [_values(torch, dtype, 5, rank + i) for i in range(w)]
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter(out, ins)
        want = sum(_values(torch, dtype, 5, q + rank).to(torch.int64) for q in range(w))
        assert torch.equal(out, want.to(dtype)), f"reduce_scatter {name}: {out} != {want}"
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(ins))
        assert torch.equal(out, want.to(dtype)), f"reduce_scatter_tensor {name}: {out}"

    for name in MOVE_DTYPES:
        dtype = getattr(torch, name)
        mine = _values(torch, torch.int64, 6, rank).to(dtype)
        # broadcast into a non-contiguous view: the result is written back through it.
        grid = torch.zeros(6, 2, dtype=dtype)
        view = grid.t()[0]  # stride 2
        view.copy_(mine)
        dist.broadcast(view, src=w - 1)
        want = _values(torch, torch.int64, 6, w - 1).to(dtype)
        assert torch.equal(grid[:, 0], want), f"broadcast {name}: {grid[:, 0]} != {want}"
        assert torch.equal(grid[:, 1], torch.zeros(6, dtype=dtype)), f"broadcast {name} wrote past"
        outs = [torch.empty(6, dtype=dtype) for _ in range(w)]
        dist.all_gather(outs, mine)
        for q in range(w):
            want = _values(torch, torch.int64, 6, q).to(dtype)
            assert torch.equal(outs[q], want), f"all_gather {name} block {q}: {outs[q]}"
        flat = torch.empty(6 * w, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine)
        assert torch.equal(flat, torch.cat(outs)), f"all_gather_into_tensor {name}: {flat}"
        # alltoall: block q of rank r goes to rank q, and rank r's block q comes from q.
        ins = [_values(torch, torch.int64, 3, 10 * rank + q).to(dtype) for q in range(w)]
        outs = [torch.empty(3, dtype=dtype) for _ in range(w)]
        dist.all_to_all(outs, ins)
        for q in range(w):
            want = _values(torch, torch.int64, 3, 10 * q + rank).to(dtype)
            assert torch.equal(outs[q], want), f"all_to_all {name} from {q}: {outs[q]}"
        out = torch.empty(3 * w, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(ins))
        assert torch.equal(out, torch.cat(outs)), f"all_to_all_single {name}: {out}"
        # send and recv around the ring, posted asynchronously.
        got = torch.empty(6, dtype=dtype)
        works = [dist.isend(mine, (rank + 1) % w), dist.irecv(got, (rank - 1) % w)]
        for work in works:
            work.wait()
        want = _values(torch, torch.int64, 6, (rank - 1) % w).to(dtype)
        assert torch.equal(got, want), f"send/recv {name}: {got} != {want}"

    # Asynchronous work: results through wait() and through the future DDP waits on.
    ts = [torch.full((1000,), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    works[0].wait()
    for i, work in enumerate(works[1:], 1):
        (result,) = work.get_future().wait()
        assert torch.equal(result, torch.full((1000,), float(w * i + w * (w - 1) // 2))), \
            f"async allreduce {i}"
    assert torch.equal(ts[0], torch.full((1000,), float(w * (w - 1) // 2)))
    dist.barrier()

    # A reduction on a dtype Railyard cannot reduce is refused before anything is sent.
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.bool))
    except RuntimeError as e:
        assert "allreduce cannot reduce Bool" in str(e), str(e)
    else:
        raise AssertionError("allreduce of a bool tensor did not raise")
    # Sub-groups: messages name their ranks as the group's.
    sub = dist.new_group([0, w - 1])
    if rank in (0, w - 1):
        t = torch.ones(4)
        dist.all_reduce(t, group=sub)
        assert torch.equal(t, torch.full((4,), 2.0)), f"allreduce in a sub-group: {t}"
    dist.barrier()
    dist.destroy_process_group()


# ---- DistributedDataParallel ----

DDP_STEPS = 12


def ddp_model():
    """The same initial weights on every rank and in the test process."""
    import torch

    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))


def ddp_train(rank, world_size, port, backend, out_dir):
    """A small MLP trained with DDP for DDP_STEPS steps on rank-dependent data; rank 0 writes
    the final parameters to out_dir/<backend>.npz."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    dist = init(rank, world_size, port, backend)
    model = ddp_model()
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)  # several buckets: overlap
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(DDP_STEPS):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        np.savez(os.path.join(out_dir, f"{backend}.npz"),
                 **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    dist.barrier()
    dist.destroy_process_group()


# ---- a rank that dies or stops ----


def survive_a_lost_rank(rank, world_size, port, timeout_s, victim, ready, go, results):
    """Every rank joins and allreduces once, then says it is ready. The victim then waits to
    be killed or stopped by the parent; the others wait for `go` and allreduce again, which
    must raise: they put (rank, message, seconds until it raised) on `results`."""
    import torch

    dist = init(rank, world_size, port, "railyard", timeout_s=timeout_s)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    ready.put((rank, socket.gethostname()))
    if rank == victim:
        signal.pause()  # until the parent's SIGKILL (or SIGSTOP, then SIGKILL)
        sys.exit(5)
    if not go.wait(60):
        sys.exit(6)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        results.put((rank, str(e), time.monotonic() - start))
    else:
        results.put((rank, "", time.monotonic() - start))
    dist.destroy_process_group()  # after a failure too: the group must come down cleanly


# ---- where the tensors of a finished operation are released ----


def release_on_the_callers_thread(rank, world_size, port, dropped):
    """Rank 0 queues an allreduce of a tensor it then forgets at once (the Work too), so that
    the backend holds the only references when the operation finishes (rank 1 joins only
    after `dropped` is set). Those references must be released on a caller's thread, never
    on the backend's worker: a worker that takes the GIL to free a tensor while the
    interpreter finalizes is ended by pthread_exit and aborts the process. A tensor subclass
    records which thread freed its Python object."""
    import threading

    import torch

    dist = init(rank, world_size, port, "railyard")
    freed_on = []

    class Tracked(torch.Tensor):
        def __del__(self):
            freed_on.append(threading.get_ident())

    if rank == 0:
        dist.all_reduce(torch.ones(1000).as_subclass(Tracked), async_op=True)
        dropped.set()
    else:
        assert dropped.wait(60), "rank 0 never queued its allreduce"
        dist.all_reduce(torch.ones(1000))
    dist.all_reduce(torch.ones(4))  # rank 0: this call releases the finished one's tensors
    dist.barrier()
    if rank == 0:
        assert freed_on == [threading.get_ident()], \
            f"the tensor was freed on thread {freed_on}, not the caller's {threading.get_ident()}"
    dist.destroy_process_group()
