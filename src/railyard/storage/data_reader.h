// DataReader: each rank's share of a seeded shuffle of a packed dataset, prefetched in
// background threads, checksummed, with a position that survives restarts and world-size
// changes.
//
// The global order. For a dataset of N samples, epoch e is the permutation P_e of [0, N)
// keyed by (seed, e) (SamplePermutation; the identity when shuffle is off). Epochs are
// concatenated into one endless global stream: global position g is sample
// P_{g / N}(g mod N). Rank r of W reads global positions S + r, S + r + W, S + r + 2W, ...
// where S is the start position (epoch `options.epoch`, offset 0, or a restored position).
// So within every span of W consecutive positions each rank takes exactly one, and the
// ranks' samples of an epoch are disjoint and together cover it (when N is not a multiple of
// W, a rank's batch may straddle two epochs; Sample::epoch says which).
//
// Positions. After every rank has consumed k samples (training steps run in lockstep), the
// global position is G = S + W*k, and SavePosition() returns the same string on every rank:
// {dataset id, N, seed, shuffle, epoch G / N, offset G mod N}. A reader of any world size W'
// that restores it continues exactly where the uninterrupted stream would: rank r' reads
// G + r', G + r' + W', ...; the union over the new ranks of their first m samples is
// global positions [G, G + W'*m). Prefetched but unconsumed samples are not counted.
//
//   DataReaderOptions o;  o.rank = rank;  o.world_size = world;  o.seed = 1234;  o.batch = 64;
//   RY_ASSIGN_OR_RETURN(auto reader, DataReader::Open("/data/packed", o));
//   if (resuming) RY_RETURN_IF_ERROR(reader->RestorePosition(saved));
//   for (;;) { RY_ASSIGN_OR_RETURN(std::vector<Sample> batch, reader->NextBatch()); ... }
//   checkpoint_metadata["data"] = reader->SavePosition();
//
// Every sample is checked against its XXH3 as it is read; a mismatch or short read is a
// DATA_LOSS naming the shard, sample and offset, returned by the NextBatch that would have
// delivered it (and by every later call until RestorePosition).
//
// Shards are read through DataReaderOptions::fs (a storage::Fs) with positional reads, so a
// test can fail a read (EIO) or truncate a shard in an in-memory Fs.
//
// Thread-safety: a DataReader's methods are called from one thread (the training loop); its
// prefetch threads are internal and stopped and joined by the destructor and by
// RestorePosition. ReadSample may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/storage/data_index.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

// A pseudo-random permutation of [0, n) keyed by (seed, epoch), evaluated one element at a
// time in O(1) memory, so any rank can jump to any position: a 6-round Feistel network on
// the smallest domain of 2^(2h) >= n values, cycle-walking until the result is below n
// (at most 4 steps on average). Round keys and the round function come from Mix64.
class SamplePermutation {
 public:
  // Precondition: n >= 1.
  SamplePermutation(uint64_t n, uint64_t seed, uint64_t epoch);
  // The element at position i. Precondition: i < size().
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 6;
  uint64_t Encrypt(uint64_t x) const;

  uint64_t n_;
  int half_bits_ = 0;
  uint64_t mask_ = 0;
  uint64_t keys_[kRounds];
};

struct DataReaderOptions {
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 0;
  uint64_t epoch = 0;   // the first epoch read (unless a position is restored)
  bool shuffle = true;  // false: every epoch in pack order
  size_t batch = 1;     // samples per NextBatch
  // Batches read ahead of the consumer, in flight included; memory is about
  // prefetch * batch * sample size.
  size_t prefetch = 4;
  int threads = 2;  // prefetch threads; 0 reads in NextBatch's caller
  // NextBatch() without a deadline waits at most this long for a batch.
  base::Duration wait_timeout = std::chrono::minutes(5);
  // Where the dataset is read from. Not owned; must outlive the reader. Null: DefaultFs().
  Fs* fs = nullptr;
};

struct Sample {
  uint64_t index = 0;     // sample number in pack order (DatasetIndex::entry, name)
  uint64_t epoch = 0;     // epoch of its global position
  uint64_t position = 0;  // global position: epoch * N + offset in the epoch's order
  std::string data;
};

class DataReader {
 public:
  // Loads and checks the index (DatasetIndex::Load's errors), opens every shard and checks
  // its size against the index (DATA_LOSS naming a missing or truncated shard), and
  // validates the options (INVALID_ARGUMENT naming the field). Starts no thread yet.
  static Result<std::unique_ptr<DataReader>> Open(const std::string& dir,
                                                  const DataReaderOptions& options);
  ~DataReader();
  DataReader(const DataReader&) = delete;
  DataReader& operator=(const DataReader&) = delete;

  // The next `batch` samples of this rank, in order; the stream never ends (it runs into
  // the following epochs). DEADLINE_EXCEEDED (naming rank and batch) when the prefetch
  // threads have not produced it by `deadline`; DATA_LOSS as in the header comment.
  Result<std::vector<Sample>> NextBatch(base::Deadline deadline);
  Result<std::vector<Sample>> NextBatch();  // deadline: options.wait_timeout from now

  // The global position after what this rank has consumed, assuming every rank consumed as
  // many samples (see the header comment). A one-line JSON object.
  std::string SavePosition() const;

  // Continues from a saved position: stops prefetching, drops what was prefetched, and
  // clears a recorded error. Errors: INVALID_ARGUMENT for text that is not a position or an
  // offset out of range (naming the field); FAILED_PRECONDITION when it was saved for
  // another dataset (id or sample count differ: the dataset was repacked or changed) or
  // with another seed or shuffle setting.
  Status RestorePosition(std::string_view position);

  // Reads and verifies sample `index` (pack order) into *out. Thread-safe (positional reads).
  // Precondition: index < num_samples().
  Status ReadSample(uint64_t index, std::string* out) const;

  const DatasetIndex& index() const { return index_; }
  uint64_t num_samples() const { return index_.num_samples(); }
  // The sample at global position g.
  uint64_t SampleAt(uint64_t g) const;

 private:
  DataReader(DatasetIndex index, std::vector<std::unique_ptr<ReadableFile>> shards,
             DataReaderOptions options);

  Result<std::vector<Sample>> ReadBatch(uint64_t batch_number) const;
  void StartWorkers();
  void StopWorkers();
  void WorkerLoop();

  const DatasetIndex index_;
  const std::vector<std::unique_ptr<ReadableFile>> shards_;
  const DataReaderOptions options_;

  // Consumer state: touched only by the calling thread, and read by workers only while they
  // are running (they are stopped before it changes).
  uint64_t start_ = 0;     // global position S
  uint64_t consumed_ = 0;  // samples delivered by NextBatch since S
  Status error_;           // first error delivered; returned until RestorePosition

  // Prefetch state, guarded by mu_.
  std::mutex mu_;
  std::condition_variable ready_cv_;  // a batch was added to ready_
  std::condition_variable space_cv_;  // the consumer took one, or stop_
  bool stop_ = false;
  uint64_t next_claim_ = 0;    // next batch number a worker will read
  uint64_t next_deliver_ = 0;  // next batch number NextBatch returns
  std::map<uint64_t, Result<std::vector<Sample>>> ready_;
  std::vector<std::thread> workers_;
};

}  // namespace railyard::storage
