// `railyard bench ...`: the benchmarks that produce the figures in docs/performance.md.
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "railyard/base/checksum.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/place/bench.h"
#include "railyard/storage/ckpt_bench.h"
#include "railyard/storage/data_bench.h"

namespace railyard::cli {
namespace {

// Dropping the page cache evicts every process's cached files, so say so before doing it.
void WarnCacheDrop(std::string_view bench, std::string_view when) {
  if (::geteuid() != 0) return;  // only root can drop it
  fmt::print(stderr,
             "bench {}: running as root, so {} it drops the page cache of the whole machine "
             "(sync; echo 3 > /proc/sys/vm/drop_caches), which other processes' cached files "
             "go with; --no-drop-caches keeps it\n",
             bench, when);
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, Action* action) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (figures for docs/performance.md)");
  bench->require_subcommand(1);
  bench->footer(
      "Examples:\n"
      "  railyard bench place --nodes 16384 --json\n"
      "  railyard bench ckpt --ranks 2 --size 1GiB --dir /lustre/tmp/ckb --steps 3 --async\n"
      "  railyard bench data --samples 100000 --readers 2 --dir /tmp/dbench\n"
      "  railyard bench comm --ranks 4 --transport tcp --op allreduce --sizes 4KiB:64MiB\n"
      "  sudo railyard bench validate --repeat 5\n"
      "  railyard bench recover --repeat 5\n"
      "Docs: docs/performance.md\n");

  RegisterBenchCommCommand(bench, action);
  RegisterBenchValidateCommand(bench, action);
  RegisterBenchRecoverCommand(bench, action);

  struct PlaceFlags {
    place::PlaceBenchOptions o;
    bool json = false;
  };
  auto f = std::make_shared<PlaceFlags>();
  CLI::App* p = bench->add_subcommand(
      "place",
      "Placement speed on a generated fat tree and quality against the exhaustive "
      "optimum and a Slurm-tree-style greedy baseline");
  p->add_option("--nodes", f->o.nodes, "nodes of the generated fat tree")->capture_default_str();
  p->add_option("--gpus-per-node", f->o.gpus_per_node, "GPUs per node")->capture_default_str();
  p->add_option("--busy-percent", f->o.busy_percent, "nodes marked busy before timing")
      ->capture_default_str();
  p->add_option("--trials", f->o.trials, "placements timed for the median")->capture_default_str();
  p->add_option("--jobs", f->o.jobs, "mixed jobs placed and released in sequence")
      ->capture_default_str();
  p->add_option("--instances", f->o.instances, "small random instances for the quality check")
      ->capture_default_str();
  p->add_option("--seed", f->o.seed, "random seed")->capture_default_str();
  p->add_flag("--json", f->json,
              "one object: nodes, gpus, place_median_ms, jobs, jobs_total_s, optimal_fraction, "
              "worse_than_greedy");
  p->footer("Example:\n  railyard bench place --nodes 16384 --json\n");
  p->callback([f, action] {
    *action = [f]() -> Outcome {
      if (f->o.nodes < 1 || f->o.nodes > 1'000'000) {
        return InvalidArgument("--nodes {}: expected 1 to 1000000", f->o.nodes);
      }
      if (f->o.busy_percent < 0 || f->o.busy_percent > 90) {
        return InvalidArgument("--busy-percent {}: expected 0 to 90", f->o.busy_percent);
      }
      if (f->o.trials < 1 || f->o.jobs < 0 || f->o.instances < 0) {
        return InvalidArgument("--trials must be positive; --jobs and --instances not negative");
      }
      place::PlaceBenchResult r = place::RunPlaceBench(f->o);
      if (f->json) {
        fmt::print("{}\n", place::ToJson(r).dump());
        return Status::Ok();
      }
      fmt::print("fat tree: {} nodes, {} GPUs\n", r.nodes, r.gpus);
      fmt::print("  one placement, median          {:>10.3f} ms\n", r.place_median_ms);
      fmt::print("  {} jobs placed and released  {:>10.3f} s\n", r.jobs, r.jobs_total_s);
      fmt::print("  leaves used == optimum         {:>10.1f} % of small instances\n",
                 100.0 * r.optimal_fraction);
      fmt::print("  worse than greedy baseline     {:>10d} instances\n", r.worse_than_greedy);
      return Status::Ok();
    };
  });

  struct CkptFlags {
    storage::CkptBenchOptions o;
    std::string size = "1GiB";
    std::string timeout = "10m";
    std::string snapshot = "protect";
    std::string read_settle = "0s";
    std::string extent = "8MiB";
    std::string xxh3 = "best";
    bool no_preallocate = false;
    bool keep_cache = false;
    bool json = false;
  };
  auto cf = std::make_shared<CkptFlags>();
  CLI::App* ck = bench->add_subcommand(
      "ckpt", "K checkpoints of random tensors from R rank processes, then read back");
  ck->add_option("--ranks", cf->o.ranks, "rank processes")->capture_default_str();
  ck->add_option("--size", cf->size, "checkpoint size, all ranks together")->capture_default_str();
  ck->add_option("--dir", cf->o.dir, "a new or empty directory (removed afterwards)")->required();
  ck->add_option("--steps", cf->o.steps, "successive checkpoints")->capture_default_str();
  ck->add_flag("--async", cf->o.async_save, "save_async: report the training-thread stall");
  ck->add_option("--snapshot", cf->snapshot,
                 "with --async, how the state is captured: protect (write-protect the pages, "
                 "copy in the background; falls back to copy where unsupported) or copy "
                 "(memcpy on the training thread)")
      ->check(CLI::IsMember({"protect", "copy"}))
      ->capture_default_str();
  ck->add_flag("--touch", cf->o.touch,
               "with --async, rewrite the whole state right after each save (an optimizer "
               "step) and count its slow-down as stall");
  ck->add_flag("--direct", cf->o.direct_io, "O_DIRECT with aligned buffers");
  ck->add_option("--io-threads", cf->o.io_threads,
                 "writes in flight per rank (O_DIRECT) or parallel regions (buffered)")
      ->capture_default_str();
  ck->add_option("--extent", cf->extent, "largest single write")->capture_default_str();
  ck->add_flag("--no-preallocate", cf->no_preallocate, "do not fallocate the shards first");
  ck->add_flag("--unaligned-state", cf->o.unaligned_state,
               "place the state 16 bytes past a page boundary (as malloc does), so that "
               "O_DIRECT saves copy every extent through a bounce buffer");
  ck->add_flag("--no-drop-caches", cf->keep_cache,
               "as root, do not drop the machine's page cache before the read phase (reads may "
               "then come from memory)");
  ck->add_option("--read-settle", cf->read_settle,
                 "wait this long between dropping the page cache and reading (VMs give freed "
                 "memory back to the host after a few seconds; compare_storage.sh uses the "
                 "same wait for fio)")
      ->capture_default_str();
  ck->add_option("--timeout", cf->timeout, "give up (and name the rank) after this")
      ->capture_default_str();
  ck->add_option("--xxh3", cf->xxh3,
                 "checksum implementation, to compare them in one build: best (AVX2 where the "
                 "CPU has it, else the baseline), baseline, avx2 or library (the system's "
                 "libxxhash)")
      ->capture_default_str();
  ck->add_flag("--json", cf->json,
               "one object: write_gbps, read_gbps, save_ms, stall_ms, commit_ms, bytes, ranks, "
               "steps, xxh3 (and snapshot, touch_ms, touch_base_ms where they apply)");
  ck->footer(
      "Example:\n  railyard bench ckpt --ranks 2 --size 4GiB --dir /tmp/ckb --async --json\n");
  ck->callback([cf, action] {
    *action = [cf]() -> Outcome {
      auto size = base::ParseBytes(cf->size);
      if (!size.ok()) return size.status().WithContext("--size");
      auto timeout = base::ParseDuration(cf->timeout);
      if (!timeout.ok()) return timeout.status().WithContext("--timeout");
      cf->o.total_bytes = *size;
      cf->o.timeout = *timeout;
      cf->o.write_protect = cf->snapshot == "protect";
      auto settle = base::ParseDuration(cf->read_settle);
      if (!settle.ok()) return settle.status().WithContext("--read-settle");
      cf->o.read_settle = *settle;
      if (cf->o.touch && !cf->o.async_save) {
        return InvalidArgument("--touch needs --async (it measures what a pending save costs)");
      }
      auto extent = base::ParseBytes(cf->extent);
      if (!extent.ok()) return extent.status().WithContext("--extent");
      cf->o.extent_bytes = *extent;
      cf->o.preallocate = !cf->no_preallocate;
      cf->o.drop_caches = !cf->keep_cache;
      if (Status s = base::UseXxh3Implementation(cf->xxh3); !s.ok()) return s.WithContext("--xxh3");
      if (cf->o.drop_caches) WarnCacheDrop("ckpt", "before the read phase");
      auto r = storage::RunCkptBench(cf->o);
      if (!r.ok()) return r.status();
      if (cf->json) {
        fmt::print("{}\n", storage::ToJson(*r).dump());
        return Status::Ok();
      }
      fmt::print("{} ranks, {} per checkpoint, {} steps{}{}\n", r->ranks,
                 base::FormatBytes(r->bytes), r->steps,
                 cf->o.async_save ? fmt::format(", async ({})", r->snapshot) : "",
                 cf->o.direct_io ? ", O_DIRECT" : "");
      fmt::print("  write {:>8.3f} GB/s   save {:>9.1f} ms (median)\n", r->write_gbps, r->save_ms);
      fmt::print("  read  {:>8.3f} GB/s   stall {:>8.1f} ms (median, training thread)\n",
                 r->read_gbps, r->stall_ms);
      if (cf->o.touch) {
        fmt::print("  state rewrite after a save {:.1f} ms, without one {:.1f} ms (median)\n",
                   r->touch_ms, r->touch_base_ms);
      }
      for (const auto& n : r->notes) fmt::print("  note: {}\n", n);
      return Status::Ok();
    };
  });

  struct DataFlags {
    storage::DataBenchOptions o;
    bool keep_cache = false;
    bool json = false;
  };
  auto df = std::make_shared<DataFlags>();
  CLI::App* db = bench->add_subcommand(
      "data", "Packed shards against the original small files, same readers, same order");
  db->add_option("--dir", df->o.dir, "scratch directory")->required();
  db->add_option("--samples", df->o.samples, "samples")->capture_default_str();
  db->add_option("--min-bytes", df->o.min_bytes, "smallest sample")->capture_default_str();
  db->add_option("--max-bytes", df->o.max_bytes, "largest sample")->capture_default_str();
  db->add_option("--readers", df->o.readers, "concurrent readers")->capture_default_str();
  db->add_option("--seed", df->o.seed, "seed")->capture_default_str();
  db->add_flag("--no-drop-caches", df->keep_cache,
               "as root, do not drop the machine's page cache before each phase (both then "
               "read warm caches)");
  db->add_flag("--json", df->json, "print the result as JSON");
  db->footer("Example:\n  railyard bench data --samples 100000 --readers 2 --dir /tmp/dbench\n");
  db->callback([df, action] {
    *action = [df]() -> Outcome {
      df->o.drop_caches = !df->keep_cache;
      if (df->o.drop_caches) WarnCacheDrop("data", "before each phase");
      if (!df->json) {
        df->o.progress = [](std::string_view s) { fmt::print(stderr, "  {}\n", s); };
      }
      auto r = storage::RunDataBench(df->o);
      if (!r.ok()) return r.status();
      if (df->json) {
        fmt::print("{}\n", storage::ToJson(*r).dump());
        return Status::Ok();
      }
      fmt::print("{} samples ({}), {} readers\n", r->samples, base::FormatBytes(r->bytes),
                 r->readers);
      fmt::print("  packed shards: {:>12.0f} samples/s {:>12}\n", r->packed.samples_per_s,
                 base::FormatByteRate(r->packed.bytes_per_s));
      fmt::print("  small files:   {:>12.0f} samples/s {:>12}\n", r->small.samples_per_s,
                 base::FormatByteRate(r->small.bytes_per_s));
      fmt::print("  speedup {:.1f}x\n", r->speedup);
      return Status::Ok();
    };
  });
}

}  // namespace railyard::cli
