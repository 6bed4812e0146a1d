#!/usr/bin/env python3
# Writes the nccl_tests_*_perf_8gpu.txt samples here: output of two nccl-tests perf binaries in
# the exact layout of NVIDIA/nccl-tests 2.19.6 (commit a0b82b2): src/util.cu writeDeviceReport,
# writeResultHeader, writeBenchmarkLinePreamble/Body (getFloatStr), writeResultFooter; size and
# count from src/all_reduce.cu and src/all_gather.cu GetCollByteCount. The figures are made up;
# Avg bus bandwidth is the mean of the printed busbw values. Run from this directory.
import sys
def fstr(v, w):
    for f in ("%*.2f", "%*.1f", "%*.0f"):
        s = f % (w, v)
        if len(s) <= w: return s
    return ((w >= 7 and "%*.1e" or "%*.0e") % (w, v))[:w]

def run(prog, coll, ngpus, sizes, timefn, factor, out):
    L = ["# Written in the layout of NVIDIA/nccl-tests 2.19.6 (a0b82b2) src/util.cu, not captured from a run; the figures are made up.\n"]
    L.append("# nccl-tests version 2.19.6 nccl-headers=22807 nccl-library=22807\n")
    L.append("# Collective test starting: %s\n" % prog)
    L.append("# nThread 1 nGpus %d minBytes %d maxBytes %d step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n" % (ngpus, sizes[0], sizes[-1]))
    L.append("#\n# Using devices\n")
    for i, bus in enumerate([0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb][:ngpus]):
        L.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n" % (i, 0, 41200, "gpu001", i, 0, bus, 0, "NVIDIA H100 80GB HBM3"))
    L.append("#\n")
    L.append("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n" % ("", "", "", "", ""))
    L.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n" % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, ""))
    L.append("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n" % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, ""))
    bw = []
    for req in sizes:
        count = req // 4
        if coll == "all_gather":
            base = (count // ngpus) & ~3
            nbytes, param = base * ngpus * 4, base
        else:
            nbytes, param = count * 4, count
        line = "%12li  %12li  %8s  %6s  %6s" % (nbytes, param, "float", "sum" if coll == "all_reduce" else "none", "%6i" % -1)
        for inplace in (0, 1):
            t = timefn(nbytes, inplace)
            alg = nbytes / 1e9 / (t * 1e-6)
            bus = alg * factor(ngpus)
            # The printed figures are what a reader sees; keep those.
            line += "  %7s  %6s  %6s  %6g" % (fstr(t, 7), fstr(alg, 6), fstr(bus, 6), 0.0)
            bw.append(float(fstr(bus, 6)))
        L.append(line + "\n")
    L.append("# %-20s : %d %s\n" % ("Out of bounds values", 0, "OK"))
    L.append("# %-20s : %g %s\n" % ("Avg bus bandwidth", sum(bw) / len(bw), ""))
    L.append("#\n# Collective test concluded: %s\n#\n\n" % prog)
    open(out, "w").write("".join(L))

# Times in us with two decimals, so that the printed figures are the ones the sample keeps.
def t_ar(n, ip): return round(22.0 + n / 250e3 * (1.0 + 0.01 * ip), 2)
def t_ag(n, ip): return round(18.0 + n / 200e3 * (1.0 + 0.02 * ip), 2)
run("all_reduce_perf", "all_reduce", 8, [8 << i for i in range(0, 25, 3)], t_ar, lambda n: 2.0 * (n - 1) / n, "nccl_tests_all_reduce_perf_8gpu.txt")
run("all_gather_perf", "all_gather", 8, [1024 << (2 * i) for i in range(0, 8)], t_ag, lambda n: (n - 1) / n, "nccl_tests_all_gather_perf_8gpu.txt")
