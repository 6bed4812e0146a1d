#!/usr/bin/python3
"""The per-rank side of bench/compare_torch.sh: one torch.distributed job on one backend,
measuring allreduce bus bandwidth, DDP step time, or checkpoint saves; rank 0 prints one
JSON object on stdout. Started once per configuration; it starts its own ranks.

    /usr/bin/python3 bench/torch_bench.py --nproc 2 --backend gloo \\
        allreduce --sizes 1048576,16777216 [--warmup 10] [--iters 500] [--budget-s 1.5]
    ... --nproc 2 --backend railyard ddp [--steps 200] [--warmup-steps 20]
    ... --nproc 2 --backend railyard save --dir /var/tmp/x [--reps 3] [--hidden 2048]

A job may also run several parts in one process group: `allreduce+ddp`.

The launcher (--nproc N) starts N interpreters of this file, each with env:// variables as
torchrun sets them (MASTER_ADDR 127.0.0.1, a free MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE) and the launcher's own environment otherwise (so
RAILYARD_TRANSPORT, RAILYARD_TCP_CC, GLOO_SOCKET_IFNAME reach them; --preload SO goes into
the ranks' LD_PRELOAD only). It waits at most --timeout-s; when one rank fails it gives the
others 5 s to fail too, then kills every rank; it exits 1 unless every rank exited 0 and
printed its result. It also reports `load`: the job's wall time, its CPU time (ranks and
launcher) and the machine's CPU time beyond that (/proc/stat), i.e. other load during it.

allreduce (f32 sum, in place, as torch.distributed's all_reduce is): per size one checked
allreduce, --warmup untimed ones, then timed ones: as many as fit in --budget-s by the
warm-up's pace (the slowest rank's), at least --min-iters and at most --iters, in chunks of
at most C = 90 / log2(N) iterations, each chunk starting from the rank's input after a
barrier (values grow by a factor N per allreduce; the chunking keeps them finite and exact).
time = the slowest rank's sum of chunk times / iterations; algbw = bytes / time; busbw =
algbw x 2(N-1)/N (nccl-tests). Values: rank r's element i is ((i % 13) + 1 + r) x 2^-100,
so after j allreduces since the chunk's start every element is exactly
(N((i % 13) + 1) + N(N-1)/2) x N^(j-1) x 2^-100 when N is a power of two (checked with
torch.equal; otherwise within 1e-5 relative). Checked: the first allreduce and the last
timed one in full, every 4th timed one at 10 positions (the first, the last, 8 random);
`wrong` counts the elements that differ, summed over ranks.

ddp: examples/torch_ddp.py's model (64 -> hidden -> hidden -> 8, GELU, Adam lr 3e-3),
DistributedDataParallel, that example's batches (seeded by step and rank); --warmup-steps
untimed steps, then --steps timed ones; a step is zero_grad, forward, MSE loss, backward
(DDP's allreduce), optimizer step, timed per step on every rank; reported: the median and
mean over steps of the slowest rank's time. Checked: every rank's parameters are bitwise
equal at the end; `weight_sum` (float64 sum of all parameters) lets the caller compare
backends.

save: a DDP job whose model is --layers Linear(hidden, hidden) + GELU (2048 x 6: 25.2 M
parameters, 302 MB of state with Adam's two moments), trained --warmup-steps steps; then
--reps rounds of four methods (the order rotates per round), each saving the whole state at
the current step, with training steps between rounds:
  (every method also reports cpu_ms: the CPU time the ranks' processes used during it, summed
  over ranks; for ry_async less K x each rank's CPU per baseline step)
  ry_sync     railyard.torch.save(state, dir, step): every rank writes its 1/N share,
              fsyncs, the step is committed atomically; figure: the slowest rank's time.
  ry_async    the same with asynchronous=True: stall = the slowest rank's time in the call;
              then K training steps run while it writes (K from the round's sync time), then
              handle.wait(); also reported: that wait, the in-flight steps' extra time over
              the round's baseline step, and lost = (call start -> wait end) - K x baseline.
  torch       torch.save({"model": state_dict, "optimizer": state_dict, "step": s}, path) on
              rank 0, then a barrier: stall = the slowest rank's time to pass that barrier.
              torch.save writes through the page cache and never fsyncs; the os.sync() that
              follows (untimed, so that its write-back does not land in the next method) is
              reported as `writeback`.
  torch_fsync the same into path.tmp, flush, os.fsync, os.replace, fsync of the directory:
              durable and atomic, the equal terms for railyard's save.
Every save is checked: the state at the call is cloned first (untimed), and after the save
completes the checkpoint is loaded into a fresh model and optimizer (railyard.torch.load on
every rank; torch.load on rank 0) and compared with torch.equal tensor by tensor.
"""

import argparse
import datetime
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

E0 = -100  # input scale 2^E0: far from float32's limits at both ends after a chunk


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=0, help="start this many ranks (the launcher)")
    p.add_argument("--backend", default="railyard", help="railyard or gloo")
    p.add_argument("--timeout-s", type=float, default=300, help="launcher: bound on the job")
    p.add_argument("--pg-timeout-s", type=float, default=60,
                   help="init_process_group's timeout (every operation's)")
    p.add_argument("--preload", default="", help="launcher: LD_PRELOAD for the ranks only")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--corrupt-for-test", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("parts", help="allreduce, ddp, save, or several joined by '+'")
    g = p.add_argument_group("allreduce")
    g.add_argument("--sizes", default="1048576,16777216,67108864", help="bytes, comma list")
    g.add_argument("--warmup", type=int, default=10)
    g.add_argument("--iters", type=int, default=500, help="at most this many timed")
    g.add_argument("--min-iters", type=int, default=10, help="at least this many timed")
    g.add_argument("--budget-s", type=float, default=1.5, help="timed seconds per size")
    g = p.add_argument_group("ddp")
    g.add_argument("--steps", type=int, default=200, help="timed DDP steps")
    g.add_argument("--warmup-steps", type=int, default=20)
    g.add_argument("--ddp-hidden", type=int, default=256, help="the example's --hidden")
    g.add_argument("--batch", type=int, default=32, help="the example's --batch")
    g = p.add_argument_group("save")
    g.add_argument("--dir", default="", help="save: where checkpoints go (emptied after each)")
    g.add_argument("--reps", type=int, default=3)
    g.add_argument("--hidden", type=int, default=2048)
    g.add_argument("--layers", type=int, default=6)
    g.add_argument("--save-batch", type=int, default=8)
    g.add_argument("--methods", default="ry_sync,ry_async,torch,torch_fsync")
    g.add_argument("--max-async-steps", type=int, default=40)
    a = p.parse_args(argv)
    a.parts = a.parts.split("+")
    for part in a.parts:
        if part not in ("allreduce", "ddp", "save"):
            p.error(f"unknown part {part!r}: expected allreduce, ddp or save")
    if "save" in a.parts and not a.dir:
        p.error("save needs --dir")
    return a


# ---------------------------------------------------------------------------------------
# The launcher


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks():
    """The machine's user + nice + system time so far, in seconds (/proc/stat's first line;
    irq and softirq left out, as a process's own CPU time leaves them out)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:4]]
    return sum(v) / os.sysconf("SC_CLK_TCK")


def launch(args, argv):
    import resource

    n = args.nproc
    wall0, machine0 = time.monotonic(), cpu_ticks()
    own0 = resource.getrusage(resource.RUSAGE_SELF)
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="torch-bench-")
    procs, outs = [], []
    try:
        for r in range(n):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                       WORLD_SIZE=str(n), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n),
                       PYTHONUNBUFFERED="1")
            if args.preload:
                env["LD_PRELOAD"] = args.preload
            out = open(os.path.join(tmp, f"rank{r}.out"), "w+")
            outs.append(out)
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), *argv, "--rank", str(r)],
                stdout=out, stdin=subprocess.DEVNULL, env=env))
        deadline = time.monotonic() + args.timeout_s
        failed_at = None
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = now
            if now > deadline or (failed_at is not None and now > failed_at + 5):
                why = "timed out" if now > deadline else "a rank failed"
                print(f"torch_bench: {why}; stopping the ranks", file=sys.stderr)
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.05)
        rcs = [p.wait() for p in procs]
        # Other load during the job: the machine's CPU time less this job's (its ranks' and
        # its own). A benchmark is only meaningful where that stays small.
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = resource.getrusage(resource.RUSAGE_SELF)
        job_cpu = (kids.ru_utime + kids.ru_stime + own.ru_utime + own.ru_stime
                   - own0.ru_utime - own0.ru_stime)
        load = {"wall_s": time.monotonic() - wall0, "job_cpu_s": job_cpu,
                "foreign_cpu_s": max(0.0, cpu_ticks() - machine0 - job_cpu)}
        results = []
        for r, out in enumerate(outs):
            out.seek(0)
            lines = [l for l in out.read().splitlines() if l.startswith("{")]
            results.append(json.loads(lines[-1]) if lines else None)
        if results[0] is not None:  # rank 0's figures, every rank's socket census
            merged = results[0]
            merged["sockets"] = [x.get("sockets") if x else None for x in results]
            merged["load"] = load
            print(json.dumps(merged), flush=True)
        if any(rcs) or None in results:
            print(f"torch_bench: ranks exited {rcs}; results from ranks "
                  f"{[r for r, x in enumerate(results) if x is not None]}", file=sys.stderr)
            return 1
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for out in outs:
            out.close()
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The ranks


def tcp_census(master_port):
    """{algorithm: {"sockets": k, "bytes": b}} over this process's connected TCP sockets,
    torch's store's (MASTER_PORT at either end) left out: the congestion control each really
    uses, and the bytes it has sent (tcp_info's tcpi_bytes_acked), so that a caller can see
    which algorithm carried the traffic (a receiving socket sends only acknowledgements)."""
    census = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                peer = s.getpeername()
            except OSError:
                continue  # listening or unconnected
            if master_port in (peer[1], s.getsockname()[1]):
                continue
            cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
            cc = cc.split(b"\0", 1)[0].decode()
            info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            acked = int.from_bytes(info[120:128], "little") if len(info) >= 128 else 0
            c = census.setdefault(cc, {"sockets": 0, "bytes": 0})
            c["sockets"] += 1
            c["bytes"] += acked
        finally:
            s.close()
    return census


class Rank:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.args = torch, dist, args
        if args.backend == "railyard":
            import railyard.torch  # noqa: F401  (registers the backend)
        dist.init_process_group(args.backend,
                                timeout=datetime.timedelta(seconds=args.pg_timeout_s))
        self.rank, self.n = dist.get_rank(), dist.get_world_size()

    def max_all(self, values):
        """Element-wise max over ranks of a list of floats."""
        t = self.torch.tensor(values, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def sum_all(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t)
        return t.item()

    # -- allreduce ------------------------------------------------------------------------

    def allreduce(self):
        torch, dist, a, n, rank = self.torch, self.dist, self.args, self.n, self.rank
        pow2 = n & (n - 1) == 0
        chunk = max(1, int(90 // max(1.0, math.log2(n))))
        rows = []
        for size in [int(s) for s in a.sizes.split(",")]:
            count = size // 4
            pattern = (torch.arange(count, dtype=torch.int64) % 13 + 1).to(torch.float64)
            x = ((pattern + rank) * 2.0 ** E0).to(torch.float32)
            base = (pattern * n + n * (n - 1) / 2) * 2.0 ** E0  # float64, exact
            gen = torch.Generator().manual_seed(a.seed + size)
            pos = torch.cat([torch.tensor([0, count - 1]),
                             torch.randint(0, count, (8,), generator=gen)])
            base_at = base[pos]
            wrong = 0

            def check(t, j, full):  # j allreduces since the chunk's start
                want = (base if full else base_at) * float(n) ** (j - 1)
                got = (t if full else t[pos]).to(torch.float64)
                if pow2:
                    return int((got != want).sum())
                return int(((got - want).abs() > 1e-5 * want.abs()).sum())

            t = x.clone()
            dist.all_reduce(t)
            wrong += check(t, 1, True)
            t.copy_(x)
            dist.barrier()
            t0 = time.perf_counter()
            for j in range(1, a.warmup + 1):
                if j > 1 and (j - 1) % chunk == 0:
                    t.copy_(x)
                dist.all_reduce(t)
            warm = time.perf_counter() - t0
            if a.warmup:
                wrong += check(t, (a.warmup - 1) % chunk + 1, False)
            pace = self.max_all([warm / max(1, a.warmup)])[0]
            iters = int(min(a.iters, max(a.min_iters, a.budget_s // max(pace, 1e-9))))
            elapsed, done = 0.0, 0
            while done < iters:
                c = min(chunk, iters - done)
                t.copy_(x)
                dist.barrier()
                t0 = time.perf_counter()
                for j in range(1, c + 1):
                    dist.all_reduce(t)
                    if a.corrupt_for_test and rank == 0 and done == 0 and j == 4:
                        t[0] += 1.0  # what a wrong value looks like to the checks
                    if j % 4 == 0 and done + j < iters:
                        wrong += check(t, j, False)
                elapsed += time.perf_counter() - t0
                done += c
            wrong += check(t, c, True)
            mean = self.max_all([elapsed / iters])[0]
            wrong = int(self.sum_all(wrong))
            algbw = size / mean / 1e9
            rows.append({"size_bytes": size, "iters": iters, "time_us": mean * 1e6,
                         "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (n - 1) / n,
                         "wrong": wrong})
            del t, x, base, pattern
        return rows

    # -- ddp ------------------------------------------------------------------------------

    def ddp_model(self, hidden):
        nn = self.torch.nn
        self.torch.manual_seed(0)
        return nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                             nn.GELU(), nn.Linear(hidden, 8))

    def example_batch(self, step, size):
        torch = self.torch
        g = torch.Generator().manual_seed(step * 100_003 + self.rank)
        x = torch.randn(size, 64, generator=g)
        return x, torch.sin(x[:, :8] * 3.0) + 0.1 * torch.randn(size, 8, generator=g)

    def same_everywhere(self, params):
        """Whether every rank holds bitwise the same parameters."""
        torch, dist = self.torch, self.dist
        flat = torch.cat([p.detach().reshape(-1).to(torch.float64) for p in params])
        hi, lo = flat.clone(), flat.clone()
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        ok = float(torch.equal(hi, flat) and torch.equal(lo, flat))
        return self.sum_all(ok) == self.n, float(flat.sum())

    def ddp(self):
        torch, a = self.torch, self.args
        from torch.nn.parallel import DistributedDataParallel

        net = self.ddp_model(a.ddp_hidden)
        model = DistributedDataParallel(net)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        times = []
        loss = None
        for step in range(1, a.warmup_steps + a.steps + 1):
            x, y = self.example_batch(step, a.batch)
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            if step > a.warmup_steps:
                times.append(time.perf_counter() - t0)
        slowest = self.max_all(times)
        same, wsum = self.same_everywhere(net.parameters())
        s = sorted(slowest)
        return {"hidden": a.ddp_hidden, "batch": a.batch, "steps": a.steps,
                "warmup_steps": a.warmup_steps,
                "params": sum(p.numel() for p in net.parameters()),
                "step_ms_median": 1e3 * (s[len(s) // 2] if len(s) % 2 else
                                         (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2),
                "step_ms_mean": 1e3 * sum(s) / len(s),
                "loss": float(loss.item()), "weight_sum": wsum, "ranks_equal": same}

    # -- save -----------------------------------------------------------------------------

    def save(self):
        torch, dist, a, rank = self.torch, self.dist, self.args, self.rank
        from torch.nn.parallel import DistributedDataParallel

        import railyard.torch as rt

        nn = torch.nn

        def make():
            torch.manual_seed(0)
            layers = []
            for _ in range(a.layers):
                layers += [nn.Linear(a.hidden, a.hidden), nn.GELU()]
            net = nn.Sequential(*layers)
            return net, torch.optim.Adam(net.parameters(), lr=1e-4)

        net, opt = make()
        model = DistributedDataParallel(net)
        gen = torch.Generator().manual_seed(1000 + rank)
        xs = [torch.randn(a.save_batch, a.hidden, generator=gen) for _ in range(4)]
        step = 0

        def train():
            nonlocal step
            step += 1
            t0 = time.perf_counter()
            opt.zero_grad()
            model(xs[step % 4]).pow(2).mean().backward()
            opt.step()
            return time.perf_counter() - t0

        for _ in range(max(2, a.warmup_steps)):
            train()
        nbytes = sum(t.numel() * t.element_size() for t in net.state_dict().values())
        nbytes += sum(v.numel() * v.element_size() for s in opt.state.values()
                      for v in s.values() if torch.is_tensor(v))

        def snapshot():  # the state as it is at the call, for the check
            m = {k: v.clone() for k, v in net.state_dict().items()}
            o = opt.state_dict()
            o = {"state": {k: {n_: (v.clone() if torch.is_tensor(v) else v)
                               for n_, v in s.items()} for k, s in o["state"].items()}}
            return m, o

        def compare(want, got_model, got_opt, got_step, at):
            bad = []
            wm, wo = want
            if sorted(got_model) != sorted(wm):
                bad.append(f"model keys {sorted(got_model)}")
            for k, v in wm.items():
                if k in got_model and not torch.equal(v, got_model[k]):
                    bad.append(f"model.{k}")
            gs = got_opt["state"]
            if sorted(gs) != sorted(wo["state"]):
                bad.append(f"optimizer state keys {sorted(gs)} != {sorted(wo['state'])}")
            for k, s in wo["state"].items():
                for n_, v in s.items():
                    g = gs.get(k, {}).get(n_)
                    if g is None or not torch.equal(torch.as_tensor(v), torch.as_tensor(g)):
                        bad.append(f"optimizer.state.{k}.{n_}")
            if got_step != at:
                bad.append(f"step {got_step} != {at}")
            return bad

        def verify_railyard(path, want, at):  # every rank reads the whole step back
            m2, o2 = make()
            st = rt.load(path, {"model": m2, "optimizer": o2}, step=at)
            return compare(want, m2.state_dict(), o2.state_dict(), st.get("step"), at)

        def verify_torch(f, want, at):
            if rank != 0:
                return []
            st = torch.load(f)
            return compare(want, st["model"], st["optimizer"], st.get("step"), at)

        def fsync_dir(d):
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        def is_done(h):
            d = getattr(h, "done", None)
            return bool(d() if callable(d) else d)

        methods = a.methods.split(",")
        dirs = {m: os.path.join(a.dir, m) for m in methods}
        if rank == 0:
            for d in dirs.values():
                os.makedirs(d, exist_ok=True)
        dist.barrier()
        results, problems = [], []
        sync_s = None
        # Round -1 is a warm-up (each railyard writer is opened by its directory's first save,
        # a collective; torch.save's first call imports what pickling needs): not reported.
        for rep in range(-1, a.reps):
            order = methods[rep % len(methods):] + methods[:rep % len(methods)]
            c0 = time.process_time()
            base_steps = [train() for _ in range(5)]
            base_cpu = (time.process_time() - c0) / 5
            baseline = self.max_all([sorted(base_steps)[2]])[0]  # per rank: CPU of a step
            for m in order:
                train()
                at = step
                want = snapshot()
                dist.barrier()
                row = {"method": m, "rep": rep, "step": at, "baseline_step_ms": baseline * 1e3,
                       "baseline_step_cpu_ms": self.sum_all(base_cpu) * 1e3}
                state = {"model": net, "optimizer": opt, "step": at}
                if m == "ry_sync":
                    t0, c0 = time.perf_counter(), time.process_time()
                    stats = rt.save(state, dirs[m], at)
                    took = self.max_all([time.perf_counter() - t0])[0]
                    cpu = self.sum_all(time.process_time() - c0)
                    sync_s = took
                    row.update(stall_ms=took * 1e3, save_ms=took * 1e3, cpu_ms=cpu * 1e3,
                               bytes_rank0=stats.get("bytes") if isinstance(stats, dict) else None)
                    bad = verify_railyard(dirs[m], want, at)
                elif m == "ry_async":
                    k = 10 if sync_s is None else math.ceil(1.5 * sync_s / baseline)
                    k = max(2, min(a.max_async_steps, k))
                    t0, c0 = time.perf_counter(), time.process_time()
                    h = rt.save(state, dirs[m], at, asynchronous=True)
                    t1 = time.perf_counter()
                    steps, done_after = [], None
                    for _ in range(k):
                        steps.append(train())
                        if done_after is None and is_done(h):
                            done_after = time.perf_counter() - t0
                    t2 = time.perf_counter()
                    h.wait()
                    t3, c3 = time.perf_counter(), time.process_time()
                    stall, wait_s, total, stepsum, done_s = self.max_all(
                        [t1 - t0, t3 - t2, t3 - t0, sum(steps),
                         1e9 if done_after is None else done_after])
                    cpu = self.sum_all(c3 - c0 - k * base_cpu)
                    row.update(stall_ms=stall * 1e3, wait_ms=wait_s * 1e3, async_steps=k,
                               cpu_ms=cpu * 1e3,
                               steps_extra_ms=(stepsum - k * baseline) * 1e3,
                               lost_ms=(total - k * baseline) * 1e3,
                               done_within_ms=None if done_s >= 1e9 else done_s * 1e3)
                    bad = verify_railyard(dirs[m], want, at)
                else:
                    f = os.path.join(dirs[m], f"ckpt-{at}.pt")
                    state = {"model": net.state_dict(), "optimizer": opt.state_dict(),
                             "step": at}
                    t0, c0 = time.perf_counter(), time.process_time()
                    if rank == 0:
                        if m == "torch":
                            torch.save(state, f)
                        else:
                            with open(f + ".tmp", "wb") as out:
                                torch.save(state, out)
                                out.flush()
                                os.fsync(out.fileno())
                            os.replace(f + ".tmp", f)
                            fsync_dir(dirs[m])
                    dist.barrier()
                    took = self.max_all([time.perf_counter() - t0])[0]
                    cpu = self.sum_all(time.process_time() - c0)
                    row.update(stall_ms=took * 1e3, save_ms=took * 1e3, cpu_ms=cpu * 1e3)
                    if m == "torch":  # its write-back, so that it does not land in the next
                        t0 = time.perf_counter()
                        if rank == 0:
                            os.sync()
                        dist.barrier()
                        row["writeback_ms"] = self.max_all([time.perf_counter() - t0])[0] * 1e3
                    bad = verify_torch(f, want, at)
                    dist.barrier()
                    if rank == 0:
                        os.remove(f)
                del state, want
                row["wrong"] = int(self.sum_all(len(bad)))
                if bad:
                    problems.append(f"rank {rank} {m} rep {rep}: {bad[:5]}")
                if rep >= 0:
                    results.append(row)
                dist.barrier()
        if rank == 0:
            for d in dirs.values():
                shutil.rmtree(d, ignore_errors=True)
            os.sync()
        dist.barrier()
        return {"state_bytes": nbytes, "params": sum(p.numel() for p in net.parameters()),
                "hidden": a.hidden, "layers": a.layers, "rows": results, "problems": problems}

    def run(self):
        out = {"backend": self.args.backend, "ranks": self.n,
               "transport": os.environ.get("RAILYARD_TRANSPORT", ""),
               "tcp_cc": os.environ.get("RAILYARD_TCP_CC", "")}
        for part in self.args.parts:
            out[part] = getattr(self, part)()
        out["sockets"] = tcp_census(int(os.environ["MASTER_PORT"]))
        self.dist.barrier()
        self.dist.destroy_process_group()
        return out


def main(argv):
    args = parse_args(argv)
    if args.rank < 0:
        if args.nproc < 1:
            print("torch_bench: --nproc N (1 or more) starts the ranks", file=sys.stderr)
            return 2
        return launch(args, argv)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    out = Rank(args).run()
    print(json.dumps(out), flush=True)
    bad = [r for r in out.get("allreduce", []) if r["wrong"]]
    if bad or (out.get("save") or {}).get("problems") or \
            ("ddp" in out and not out["ddp"]["ranks_equal"]):
        print(f"torch_bench: rank {args.rank}: wrong values: {bad} "
              f"{(out.get('save') or {}).get('problems')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
