// `railyard ckpt ls|verify|export`: inspect, check and convert checkpoints.
#include <fmt/format.h>

#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/safetensors.h"

namespace railyard::cli {
namespace {

struct CkptFlags {
  std::string dir;
  int64_t step = -1;
  bool verify = false;
  std::string format = "safetensors";
  std::string out;
};

Status List(const CkptFlags& f) {
  RY_ASSIGN_OR_RETURN(auto steps, storage::ListCheckpoints(f.dir, f.verify));
  if (steps.empty()) {
    fmt::print("no checkpoints in {}\n", f.dir);
    return Status::Ok();
  }
  fmt::print("{:<10} {:<11} {:>10} {:>6}  {}\n", "STEP", "STATE", "SIZE", "RANKS", "DETAIL");
  for (const auto& s : steps) {
    fmt::print("{:<10} {:<11} {:>10} {:>6}  {}{}\n", s.step, storage::StepStateName(s.state),
               base::FormatBytes(s.bytes), s.world_size > 0 ? std::to_string(s.world_size) : "-",
               s.latest ? "(latest) " : "", s.detail);
  }
  return Status::Ok();
}

Outcome Verify(const CkptFlags& f) {
  std::optional<int64_t> step;
  if (f.step >= 0) step = f.step;
  auto report = storage::VerifyCheckpoint(f.dir, step);
  if (!report.ok()) return report.status();
  for (const auto& w : report->warnings) fmt::print("warning: {}\n", w);
  if (report->status.ok()) {
    fmt::print("step {} OK ({} verified)\n", report->step,
               base::FormatBytes(report->bytes_verified));
    return Status::Ok();
  }
  std::string fallback = report->fallback_step
                             ? fmt::format("; would fall back to step {}", *report->fallback_step)
                             : "; no older valid step to fall back to";
  // Exit codes (docs/storage.md): a step that fails verification for whatever reason (a bad
  // manifest, a missing or short shard, a checksum) is the verdict of the operation, exit 1;
  // exit 2 is kept for bad input (no such directory or step, a bad flag).
  return DataLoss("step {} is corrupt: {}{}", report->step, report->status.message(), fallback);
}

Status Export(const CkptFlags& f) {
  if (f.format != "safetensors") {
    return InvalidArgument("--format '{}': expected safetensors", f.format);
  }
  RY_ASSIGN_OR_RETURN(auto reader, storage::CheckpointReader::Open(f.dir, f.step));
  RY_RETURN_IF_ERROR(storage::ExportSafetensors(*reader, f.out));
  fmt::print("step {} -> {}\n", reader->step(), f.out);
  return Status::Ok();
}

}  // namespace

void RegisterCkptCommand(CLI::App& app, Action* action) {
  CLI::App* ck =
      app.add_subcommand("ckpt", "Checkpoints: list, verify every checksum, export to safetensors");
  ck->require_subcommand(1);
  ck->footer(
      "Examples:\n"
      "  railyard ckpt ls /lustre/run42/ckpt\n"
      "  railyard ckpt verify /lustre/run42/ckpt            # the one a restart would load\n"
      "  railyard ckpt export /lustre/run42/ckpt --step 1200 --format safetensors --out m.st\n"
      "Docs: docs/storage.md\n");

  auto lf = std::make_shared<CkptFlags>();
  CLI::App* ls = ck->add_subcommand("ls", "List checkpoints: step, state, size, ranks");
  ls->add_option("dir", lf->dir, "checkpoint directory")->required();
  ls->add_flag("--verify", lf->verify, "also verify every checksum (reads everything)");
  ls->callback([lf, action] { *action = [lf]() -> Outcome { return List(*lf); }; });

  auto vf = std::make_shared<CkptFlags>();
  CLI::App* vr = ck->add_subcommand(
      "verify",
      "Verify the manifest, the shards and every checksum; exit 0 and print the "
      "step when valid, exit 1 naming the corrupt file and extent and the step it "
      "would fall back to, exit 2 when there is no such directory or step");
  vr->add_option("dir", vf->dir, "checkpoint directory")->required();
  vr->add_option("--step", vf->step, "this step (default: the newest, which a restart loads)");
  vr->callback([vf, action] { *action = [vf]() -> Outcome { return Verify(*vf); }; });

  auto ef = std::make_shared<CkptFlags>();
  CLI::App* ex = ck->add_subcommand("export", "Write one step as a single safetensors file");
  ex->add_option("dir", ef->dir, "checkpoint directory")->required();
  ex->add_option("--step", ef->step, "step to export")->required();
  ex->add_option("--format", ef->format, "safetensors")->capture_default_str();
  ex->add_option("--out", ef->out, "output file")->required();
  ex->callback([ef, action] { *action = [ef]() -> Outcome { return Export(*ef); }; });
}

}  // namespace railyard::cli
