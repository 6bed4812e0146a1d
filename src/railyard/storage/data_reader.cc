#include "railyard/storage/data_reader.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "railyard/base/checksum.h"
#include "railyard/base/config.h"
#include "railyard/storage/synthetic_data.h"

namespace railyard::storage {
namespace {

constexpr std::string_view kPositionFormat = "railyard-data-position";
constexpr int kPositionVersion = 1;
// Workers re-check their predicate at least this often; a notify normally wakes them first.
constexpr auto kWorkerRecheck = std::chrono::milliseconds(500);

Status ValidateOptions(const DataReaderOptions& o) {
  if (o.world_size < 1) {
    return InvalidArgument("reader world_size must be >= 1, got {}", o.world_size);
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return InvalidArgument("reader rank {} is outside 0..{}", o.rank, o.world_size - 1);
  }
  if (o.batch < 1 || o.batch > (size_t{1} << 24)) {
    return InvalidArgument("reader batch must be in 1..2^24, got {}", o.batch);
  }
  if (o.prefetch < 1 || o.prefetch > 4096) {
    return InvalidArgument("reader prefetch depth must be in 1..4096, got {}", o.prefetch);
  }
  if (o.threads < 0 || o.threads > 256) {
    return InvalidArgument("reader threads must be in 0..256, got {}", o.threads);
  }
  return Status::Ok();
}

}  // namespace

// ---- the permutation ----

SamplePermutation::SamplePermutation(uint64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  const int bits = n <= 1 ? 0 : std::bit_width(n - 1);
  half_bits_ = (bits + 1) / 2;
  mask_ = half_bits_ == 0 ? 0 : (~uint64_t{0} >> (64 - half_bits_));
  const uint64_t base = Mix64(Mix64(seed) ^ Mix64(epoch + 0x632be59bd9b4e019ull));
  for (int i = 0; i < kRounds; ++i) keys_[i] = Mix64(base + static_cast<uint64_t>(i));
}

uint64_t SamplePermutation::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t next = left ^ (Mix64(right ^ keys_[i]) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t SamplePermutation::operator()(uint64_t i) const {
  // Cycle walking: the Feistel network permutes [0, 2^(2h)); following the cycle from i until
  // it re-enters [0, n) restricts it to a permutation of [0, n).
  uint64_t x = Encrypt(i);
  while (x >= n_) x = Encrypt(x);
  return x;
}

// ---- opening ----

DataReader::DataReader(DatasetIndex index, std::vector<std::unique_ptr<ReadableFile>> shards,
                       DataReaderOptions options)
    : index_(std::move(index)), shards_(std::move(shards)), options_(std::move(options)) {
  start_ = options_.epoch * index_.num_samples();
}

DataReader::~DataReader() { StopWorkers(); }

Result<std::unique_ptr<DataReader>> DataReader::Open(const std::string& dir,
                                                     const DataReaderOptions& options) {
  RY_RETURN_IF_ERROR(ValidateOptions(options));
  Fs* fs = options.fs != nullptr ? options.fs : DefaultFs();
  RY_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::Load(dir, fs));
  const uint64_t n = index.num_samples();
  if (options.epoch > std::numeric_limits<uint64_t>::max() / n - 1) {
    return InvalidArgument("reader epoch {} is out of range for {} samples", options.epoch, n);
  }
  std::vector<std::unique_ptr<ReadableFile>> shards;
  for (const DataShardInfo& info : index.shards()) {
    const std::string path = fmt::format("{}/{}", dir, info.file);
    // Buffered: samples are small random reads that the page cache and readahead serve well.
    Result<std::unique_ptr<ReadableFile>> file = fs->NewReadableFile(path);
    if (file.status().code() == StatusCode::kNotFound) {
      return DataLoss("shard '{}' of dataset '{}' is missing (the index names {} shards)", path,
                      dir, index.shards().size());
    }
    RY_RETURN_IF_ERROR(file.status().WithContext("opening a shard"));
    RY_ASSIGN_OR_RETURN(uint64_t size, (*file)->Size());
    if (size != info.bytes) {
      return DataLoss("shard '{}' has {} bytes but the index says {} ({})", path, size, info.bytes,
                      size < info.bytes ? "truncated" : "changed after packing");
    }
    shards.push_back(std::move(*file));
  }
  return std::unique_ptr<DataReader>(new DataReader(std::move(index), std::move(shards), options));
}

// ---- reading ----

uint64_t DataReader::SampleAt(uint64_t g) const {
  const uint64_t n = index_.num_samples();
  const uint64_t epoch = g / n, offset = g % n;
  if (!options_.shuffle) return offset;
  return SamplePermutation(n, options_.seed, epoch)(offset);
}

Status DataReader::ReadSample(uint64_t i, std::string* out) const {
  const DataSampleEntry& e = index_.entry(i);
  const DataShardInfo& shard = index_.shards()[e.shard];
  out->resize(e.length);
  auto name = [&]() -> std::string {  // only built for error messages
    return index_.name(i).empty() ? "" : fmt::format(" ('{}')", index_.name(i));
  };
  Status st = shards_[e.shard]->PRead(e.offset, out->data(), e.length);
  if (!st.ok()) {
    // The Fs names the file and byte range (DATA_LOSS "... (truncated file)" for a short
    // read); add which sample needed them.
    return st.WithContext(fmt::format("read of sample {}{} at offset {} of shard '{}/{}'", i,
                                      name(), e.offset, index_.dir(), shard.file));
  }
  const uint64_t sum = base::Xxh3(*out);
  if (sum != e.xxh3) {
    return DataLoss(
        "shard '{}/{}': sample {}{} at offset {} ({} bytes) has checksum {} but the "
        "index says {}",
        index_.dir(), shard.file, i, name(), e.offset, e.length, base::ChecksumHex(sum),
        base::ChecksumHex(e.xxh3));
  }
  return Status::Ok();
}

Result<std::vector<Sample>> DataReader::ReadBatch(uint64_t batch_number) const {
  const uint64_t n = index_.num_samples();
  const uint64_t world = static_cast<uint64_t>(options_.world_size);
  std::vector<Sample> batch(options_.batch);
  std::vector<uint32_t> order(options_.batch);
  std::optional<SamplePermutation> permutation;  // rebuilt only when the epoch changes
  for (size_t j = 0; j < batch.size(); ++j) {
    const uint64_t k = batch_number * options_.batch + j;  // local sample number
    Sample& s = batch[j];
    s.position = start_ + static_cast<uint64_t>(options_.rank) + k * world;
    s.epoch = s.position / n;
    if (!options_.shuffle) {
      s.index = s.position % n;
    } else {
      if (!permutation || s.epoch != batch[j - 1].epoch) {
        permutation.emplace(n, options_.seed, s.epoch);
      }
      s.index = (*permutation)(s.position % n);
    }
    order[j] = static_cast<uint32_t>(j);
  }
  // Reading in file order lets neighbouring samples share pages and disk requests.
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const DataSampleEntry& ea = index_.entry(batch[a].index);
    const DataSampleEntry& eb = index_.entry(batch[b].index);
    return ea.shard != eb.shard ? ea.shard < eb.shard : ea.offset < eb.offset;
  });
  for (uint32_t j : order) RY_RETURN_IF_ERROR(ReadSample(batch[j].index, &batch[j].data));
  return batch;
}

Result<std::vector<Sample>> DataReader::NextBatch() {
  return NextBatch(base::Deadline::After(options_.wait_timeout));
}

Result<std::vector<Sample>> DataReader::NextBatch(base::Deadline deadline) {
  if (!error_.ok()) return error_;
  Result<std::vector<Sample>> batch = Status(StatusCode::kInternal, "unset");
  if (options_.threads == 0) {
    batch = ReadBatch(next_deliver_);
    ++next_deliver_;
  } else {
    if (workers_.empty()) StartWorkers();
    std::unique_lock<std::mutex> lock(mu_);
    auto it = ready_.find(next_deliver_);
    while (it == ready_.end()) {
      if (deadline.IsNever()) {
        ready_cv_.wait(lock);
      } else if (ready_cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout &&
                 ready_.find(next_deliver_) == ready_.end()) {
        return DeadlineExceeded(
            "data reader rank {} of {}: batch {} (global position {}) of '{}' was not read by "
            "the deadline; {} prefetch threads are still reading",
            options_.rank, options_.world_size, next_deliver_,
            start_ + options_.rank + consumed_ * options_.world_size, index_.dir(),
            workers_.size());
      }
      it = ready_.find(next_deliver_);
    }
    batch = std::move(it->second);
    ready_.erase(it);
    ++next_deliver_;
    lock.unlock();
    space_cv_.notify_all();
  }
  if (!batch.ok()) {
    error_ = batch.status();
    return error_;
  }
  consumed_ += batch->size();
  return batch;
}

// ---- prefetch threads ----

void DataReader::StartWorkers() {
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

void DataReader::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  space_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
  ready_.clear();
  next_claim_ = 0;
  next_deliver_ = 0;
}

void DataReader::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (next_claim_ >= next_deliver_ + options_.prefetch) {  // queue full: wait for the consumer
      space_cv_.wait_for(lock, kWorkerRecheck);
      continue;
    }
    const uint64_t b = next_claim_++;
    lock.unlock();
    // A batch takes at most batch-size reads; shutdown waits for the one in flight.
    Result<std::vector<Sample>> batch = ReadBatch(b);
    lock.lock();
    if (stop_) break;
    ready_.emplace(b, std::move(batch));
    ready_cv_.notify_all();
  }
}

// ---- positions ----

std::string DataReader::SavePosition() const {
  const uint64_t n = index_.num_samples();
  const uint64_t g = start_ + consumed_ * static_cast<uint64_t>(options_.world_size);
  const nlohmann::json j = {{"format", kPositionFormat},
                            {"version", kPositionVersion},
                            {"dataset", base::ChecksumHex(index_.id())},
                            {"samples", n},
                            {"seed", options_.seed},
                            {"shuffle", options_.shuffle},
                            {"epoch", g / n},
                            {"offset", g % n}};
  return j.dump();
}

Status DataReader::RestorePosition(std::string_view text) {
  const std::string what = "data position";
  RY_ASSIGN_OR_RETURN(nlohmann::json j, base::ParseJson(text, what));
  base::FieldContext ctx(what);
  if (!j.is_object()) return ctx.Error("expected a JSON object");
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
      j, {"format", "version", "dataset", "samples", "seed", "shuffle", "epoch", "offset"}, ctx));
  RY_ASSIGN_OR_RETURN(std::string format, base::RequireString(j, "format", ctx));
  if (format != kPositionFormat) {
    return ctx.Child("format").Error(
        fmt::format("expected '{}', got '{}'", kPositionFormat, format));
  }
  RY_ASSIGN_OR_RETURN(int64_t version, base::RequireInt(j, "version", ctx));
  if (version != kPositionVersion) {
    return ctx.Child("version").Error(
        fmt::format("version {} is not one this railyard "
                    "understands ({})",
                    version, kPositionVersion));
  }
  RY_ASSIGN_OR_RETURN(std::string dataset_hex, base::RequireString(j, "dataset", ctx));
  Result<uint64_t> dataset = base::ParseChecksumHex(dataset_hex);
  if (!dataset.ok()) return ctx.Child("dataset").Error(dataset.status().message());
  RY_ASSIGN_OR_RETURN(uint64_t samples, base::RequireUint64(j, "samples", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t seed, base::RequireUint64(j, "seed", ctx));
  RY_ASSIGN_OR_RETURN(bool shuffle, base::RequireBool(j, "shuffle", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t epoch, base::RequireUint64(j, "epoch", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t offset, base::RequireUint64(j, "offset", ctx));

  const uint64_t n = index_.num_samples();
  if (*dataset != index_.id() || samples != n) {
    return FailedPrecondition(
        "data position was saved for dataset {} ({} samples) but '{}' holds dataset {} ({} "
        "samples): it was repacked or changed",
        dataset_hex, samples, index_.dir(), base::ChecksumHex(index_.id()), n);
  }
  if (seed != options_.seed || shuffle != options_.shuffle) {
    return FailedPrecondition(
        "data position was saved with seed {} and shuffle {} but this reader has seed {} and "
        "shuffle {}; resume with the saved settings",
        seed, shuffle, options_.seed, options_.shuffle);
  }
  if (offset >= n) {
    return ctx.Child("offset").Error(
        fmt::format("{} is out of range: the dataset has {} samples", offset, n));
  }
  if (epoch > (std::numeric_limits<uint64_t>::max() - offset) / n - 1) {
    return ctx.Child("epoch").Error(fmt::format("{} is out of range for {} samples", epoch, n));
  }
  StopWorkers();
  start_ = epoch * n + offset;
  consumed_ = 0;
  error_ = Status::Ok();
  return Status::Ok();
}

}  // namespace railyard::storage
