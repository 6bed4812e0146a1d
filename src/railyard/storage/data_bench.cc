#include "railyard/storage/data_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "railyard/base/checksum.h"
#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/storage/data_pack.h"
#include "railyard/storage/data_reader.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSmallDir = "ry-bench-small";
constexpr std::string_view kPackedDir = "ry-bench-packed";

Status Validate(const DataBenchOptions& o) {
  if (o.dir.empty()) return InvalidArgument("bench data: a scratch directory is required");
  if (o.readers < 1 || o.readers > 1024) {
    return InvalidArgument("bench data: readers must be in 1..1024, got {}", o.readers);
  }
  if (o.threads_per_reader < 1) {
    return InvalidArgument("bench data: threads per reader must be >= 1, got {}",
                           o.threads_per_reader);
  }
  return ValidateSyntheticSpec(
      {.samples = o.samples, .min_bytes = o.min_bytes, .max_bytes = o.max_bytes, .seed = o.seed});
}

// Drops clean page-cache pages, dentries and inodes so the next phase reads from storage.
// Returns whether it did, and *note says why not.
bool DropCaches(bool wanted, std::string* note) {
  if (!wanted) {
    *note = "cache dropping disabled: both phases read warm caches";
    return false;
  }
  if (::geteuid() != 0) {
    *note = "not root: both phases read warm caches (the data was just written)";
    return false;
  }
  ::sync();  // dirty pages cannot be dropped
  base::UniqueFd fd(::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC));
  if (!fd.valid() || ::write(fd.get(), "3\n", 2) != 2) {
    *note = fmt::format(
        "cannot write /proc/sys/vm/drop_caches ({}): both phases read warm "
        "caches",
        ErrnoStatus(errno, "drop_caches").message());
    return false;
  }
  *note = "page cache, dentries and inodes dropped before each phase";
  return true;
}

void Finish(DataBenchPhase* phase) {
  if (phase->seconds <= 0) return;
  phase->samples_per_s = static_cast<double>(phase->samples) / phase->seconds;
  phase->bytes_per_s = static_cast<double>(phase->bytes) / phase->seconds;
}

// Runs body(r, &samples, &bytes) on `readers` threads and times them together.
template <typename Body>
Result<DataBenchPhase> TimePhase(int readers, const Body& body) {
  std::vector<Status> errors(readers);
  std::vector<uint64_t> samples(readers, 0), bytes(readers, 0);
  std::vector<std::thread> threads;
  const auto start = base::Clock::now();
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&, r] { errors[r] = body(r, &samples[r], &bytes[r]); });
  }
  for (std::thread& t : threads) t.join();
  DataBenchPhase phase;
  phase.seconds = base::SecondsSince(start);
  for (int r = 0; r < readers; ++r) {
    RY_RETURN_IF_ERROR(errors[r].WithContext(fmt::format("reader {}", r)));
    phase.samples += samples[r];
    phase.bytes += bytes[r];
  }
  Finish(&phase);
  return phase;
}

// Samples of epoch 0 that reader r of R reads: global positions r, r + R, ... below n.
uint64_t ShareOf(uint64_t n, int r, int readers) {
  const uint64_t rr = static_cast<uint64_t>(r), w = static_cast<uint64_t>(readers);
  return rr >= n ? 0 : (n - rr + w - 1) / w;
}

Result<DataBenchPhase> ReadPacked(const DataBenchOptions& o, const std::string& dir) {
  return TimePhase(o.readers, [&](int r, uint64_t* samples, uint64_t* bytes) -> Status {
    DataReaderOptions ro;
    ro.rank = r;
    ro.world_size = o.readers;
    ro.seed = o.seed;
    ro.batch = o.batch;
    ro.prefetch = o.prefetch;
    ro.threads = o.threads_per_reader;
    RY_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(dir, ro));
    const uint64_t want = ShareOf(reader->num_samples(), r, o.readers);
    while (*samples < want) {
      RY_ASSIGN_OR_RETURN(std::vector<Sample> batch, reader->NextBatch());
      for (const Sample& s : batch) {
        if (*samples == want) break;  // the rest of the last batch is already epoch 1
        *samples += 1;
        *bytes += s.data.size();
      }
    }
    return Status::Ok();
  });
}

Result<DataBenchPhase> ReadSmallFiles(const DataBenchOptions& o, const DatasetIndex& index,
                                      const std::string& dir) {
  const uint64_t n = index.num_samples();
  const SamplePermutation order(n, o.seed, 0);  // epoch 0, as the packed readers read
  return TimePhase(o.readers, [&](int r, uint64_t* samples, uint64_t* bytes) -> Status {
    std::string data(o.max_bytes, '\0'), path;
    for (uint64_t g = static_cast<uint64_t>(r); g < n; g += static_cast<uint64_t>(o.readers)) {
      const uint64_t i = order(g);
      path.assign(dir).append("/").append(index.name(i));
      base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
      size_t got = 0;
      for (;;) {
        if (got == data.size()) data.resize(data.size() * 2 + 1);
        ssize_t k = ::read(fd.get(), data.data() + got, data.size() - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return ErrnoStatus(errno, fmt::format("read of '{}'", path));
        if (k == 0) break;
        got += static_cast<size_t>(k);
      }
      fd.Reset();
      if (base::Xxh3(data.data(), got) != index.entry(i).xxh3) {
        return DataLoss("'{}' changed since it was packed (checksum differs)", path);
      }
      *samples += 1;
      *bytes += got;
    }
    return Status::Ok();
  });
}

Result<DataBenchResult> Run(const DataBenchOptions& o, const std::string& small_dir,
                            const std::string& packed_dir) {
  auto say = [&](std::string line) {
    if (o.progress) o.progress(line);
  };
  const SyntheticSpec spec{
      .samples = o.samples, .min_bytes = o.min_bytes, .max_bytes = o.max_bytes, .seed = o.seed};
  DataBenchResult result;
  result.samples = o.samples;
  result.readers = o.readers;

  say(fmt::format("writing {} small files to {}", o.samples, small_dir));
  auto start = base::Clock::now();
  RY_RETURN_IF_ERROR(WriteSyntheticFiles(spec, small_dir));
  result.write_small_seconds = base::SecondsSince(start);

  say(fmt::format("packing them into {}", packed_dir));
  PackOptions pack;
  pack.shard_bytes = o.shard_bytes;
  pack.overwrite = true;
  RY_ASSIGN_OR_RETURN(PackStats stats, PackDirectory(small_dir, packed_dir, pack));
  result.pack_seconds = stats.seconds;
  result.shards = stats.shards;
  result.bytes = stats.bytes;
  RY_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::Load(packed_dir));

  result.caches_dropped = DropCaches(o.drop_caches, &result.cache_note);
  say(fmt::format("reading the small files with {} readers", o.readers));
  RY_ASSIGN_OR_RETURN(result.small, ReadSmallFiles(o, index, small_dir));

  if (result.caches_dropped) DropCaches(true, &result.cache_note);
  say(fmt::format("reading the packed shards with {} readers", o.readers));
  RY_ASSIGN_OR_RETURN(result.packed, ReadPacked(o, packed_dir));
  if (result.small.samples_per_s > 0) {
    result.speedup = result.packed.samples_per_s / result.small.samples_per_s;
  }
  return result;
}

nlohmann::json PhaseJson(const DataBenchPhase& p) {
  return {{"samples", p.samples},
          {"bytes", p.bytes},
          {"seconds", p.seconds},
          {"samples_per_s", p.samples_per_s},
          {"mb_per_s", p.bytes_per_s / 1e6}};
}

}  // namespace

Result<DataBenchResult> RunDataBench(const DataBenchOptions& options) {
  RY_RETURN_IF_ERROR(Validate(options));
  RY_RETURN_IF_ERROR(base::MakeDirs(options.dir));
  const std::string small_dir = fmt::format("{}/{}", options.dir, kSmallDir);
  const std::string packed_dir = fmt::format("{}/{}", options.dir, kPackedDir);
  // Both names are this benchmark's own, so leftovers of an earlier run are safe to remove.
  auto cleanup = [&] {
    std::error_code ec;
    fs::remove_all(small_dir, ec);
    fs::remove_all(packed_dir, ec);
  };
  cleanup();
  Result<DataBenchResult> result = Run(options, small_dir, packed_dir);
  if (!options.keep) cleanup();
  return result;
}

nlohmann::json ToJson(const DataBenchResult& r) {
  return {{"samples", r.samples},
          {"bytes", r.bytes},
          {"shards", r.shards},
          {"readers", r.readers},
          {"write_small_s", r.write_small_seconds},
          {"pack_s", r.pack_seconds},
          {"packed", PhaseJson(r.packed)},
          {"small", PhaseJson(r.small)},
          {"speedup", r.speedup},
          {"caches", r.caches_dropped ? "dropped" : "warm"},
          {"cache_note", r.cache_note}};
}

}  // namespace railyard::storage
