// `railyard data pack`: many small training samples -> large shard files with an index.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "railyard/base/progress.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/storage/data_pack.h"

namespace railyard::cli {

void RegisterDataCommand(CLI::App& app, Action* action) {
  CLI::App* data = app.add_subcommand("data", "Training data: pack small samples into shards");
  data->require_subcommand(1);
  data->footer(
      "Examples:\n"
      "  railyard data pack --from /data/raw --out /lustre/ds/packed\n"
      "  railyard data pack --synthetic 100000 --min-size 1KiB --max-size 4KiB --out /tmp/ds\n"
      "Docs: docs/storage.md\n");
  struct Flags {
    std::string from;
    // Signed, so that "-5" is refused instead of wrapping around to 2^64 - 5.
    int64_t synthetic = 0;
    std::string min_size = "1KiB";
    std::string max_size = "4KiB";
    uint64_t seed = 1;
    std::string out;
    std::string shard_size = "256MiB";
    bool overwrite = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* pack = data->add_subcommand(
      "pack", "Pack the files of a directory (sorted by path) or a synthetic set into shards");
  pack->add_option("--from", f->from, "directory of sample files");
  pack->add_option("--synthetic", f->synthetic, "generate this many samples instead");
  pack->add_option("--min-size", f->min_size, "smallest synthetic sample")->capture_default_str();
  pack->add_option("--max-size", f->max_size, "largest synthetic sample")->capture_default_str();
  pack->add_option("--seed", f->seed, "seed of the synthetic set")->capture_default_str();
  pack->add_option("--out", f->out, "output directory (the index is written last)")->required();
  pack->add_option("--shard-size", f->shard_size, "target shard size")->capture_default_str();
  pack->add_flag("--overwrite", f->overwrite, "replace a dataset already in --out");
  pack->callback([f, action] {
    *action = [f]() -> Outcome {
      if (f->synthetic < 0) {
        return InvalidArgument("--synthetic {}: expected a positive number of samples",
                               f->synthetic);
      }
      if (f->from.empty() == (f->synthetic == 0)) {
        return InvalidArgument("give exactly one of --from DIR and --synthetic N");
      }
      storage::PackOptions po;
      auto shard = base::ParseBytes(f->shard_size);
      if (!shard.ok()) return shard.status().WithContext("--shard-size");
      po.shard_bytes = *shard;
      po.overwrite = f->overwrite;
      // A terminal sees one line redrawn; a log gets a line per tenth of the work.
      auto progress = std::make_shared<base::Progress>(stderr);
      po.progress = [progress](uint64_t done, uint64_t total) {
        progress->Update(done, total, fmt::format("  packed {}/{} samples", done, total));
        if (done == total) {
          // Keep the last count on screen: a terminal line ends with a newline, not cleared.
          if (progress->terminal()) fmt::print(stderr, "\n");
        }
      };
      Result<storage::PackStats> st = Internal("no input chosen");
      if (!f->from.empty()) {
        st = storage::PackDirectory(f->from, f->out, po);
      } else {
        storage::SyntheticSpec spec;
        spec.samples = static_cast<uint64_t>(f->synthetic);
        auto lo = base::ParseBytes(f->min_size);
        if (!lo.ok()) return lo.status().WithContext("--min-size");
        auto hi = base::ParseBytes(f->max_size);
        if (!hi.ok()) return hi.status().WithContext("--max-size");
        spec.min_bytes = *lo;
        spec.max_bytes = *hi;
        spec.seed = f->seed;
        st = storage::PackSynthetic(spec, f->out, po);
      }
      if (!st.ok()) return st.status();
      fmt::print("packed {} samples ({}) into {} shards in {:.2f}s: {}\n", st->samples,
                 base::FormatBytes(st->bytes), st->shards, st->seconds, f->out);
      return Status::Ok();
    };
  });
}

}  // namespace railyard::cli
