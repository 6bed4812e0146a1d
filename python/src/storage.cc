// railyard._core's storage: checkpoints (writer, async saver, reader, catalog) and packed
// training data (pack, reader). railyard/checkpoint.py and railyard/data.py give them their
// Python shape.
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "binding.h"
#include "railyard/storage/agreement.h"
#include "railyard/storage/async_saver.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/data_pack.h"
#include "railyard/storage/data_reader.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/manifest.h"

namespace railyard::python {
namespace {

using storage::TensorView;
using Metadata = std::map<std::string, std::string>;

// The pieces of one save: the views and the memory they point into, lent by Python objects
// for the duration of the call (destroy with the GIL held).
struct Pieces {
  std::vector<TensorView> views;
  std::vector<std::unique_ptr<Memory>> memory;
};

// `pieces`: (name, dtype, shape, offsets, sizes, data) tuples, data as Memory takes it.
Pieces ToPieces(const py::list& pieces) {
  Pieces out;
  for (py::handle item : pieces) {
    auto t = item.cast<py::tuple>();
    if (t.size() != 6)
      throw py::value_error("a piece is (name, dtype, shape, offsets, sizes, data)");
    TensorView v;
    v.name = t[0].cast<std::string>();
    v.dtype = Unwrap(storage::ParseDType(t[1].cast<std::string>()));
    v.shape = t[2].cast<std::vector<int64_t>>();
    v.offsets = t[3].cast<std::vector<int64_t>>();
    v.sizes = t[4].cast<std::vector<int64_t>>();
    auto memory = std::make_unique<Memory>(t[5], /*writable=*/false);
    // The library trusts `data` to hold the piece; a buffer of another size would be read out
    // of bounds, so it is refused here.
    if (v.byte_size() != memory->size()) {
      Raise(InvalidArgument("tensor '{}': the data holds {} bytes where the piece needs {}", v.name,
                            memory->size(), v.byte_size()));
    }
    v.data = memory->data();
    out.views.push_back(std::move(v));
    out.memory.push_back(std::move(memory));
  }
  return out;
}

py::dict SaveStatsDict(const storage::SaveStats& s) {
  py::dict d;
  d["step"] = s.step;
  d["bytes"] = s.bytes;
  d["write_seconds"] = s.write_seconds;
  d["commit_seconds"] = s.commit_seconds;
  d["total_seconds"] = s.total_seconds;
  d["direct"] = s.direct;
  d["warning"] = s.warning;
  return d;
}

// A CheckpointWriter and, with several ranks, the FileAgreement its ranks commit through
// (agreement.h: processes sharing the checkpoint's file system).
class Writer {
 public:
  Writer(storage::WriterOptions options, const std::string& run_id) {
    ThrowIfError(WithoutGil([&] { return Open(std::move(options), run_id); }));
  }

  void Save(int64_t step, const py::list& pieces, const Metadata& metadata) {
    storage::CheckpointWriter& w = writer();
    Pieces p = ToPieces(pieces);
    ThrowIfError(WithoutGil([&] { return w.Save(step, p.views, metadata); }));
  }

  py::dict LastStats() { return SaveStatsDict(writer().last_stats()); }

  // For AsyncWriter, which takes both over.
  std::unique_ptr<storage::CheckpointWriter> TakeWriter() {
    writer();
    return std::move(writer_);
  }
  std::unique_ptr<storage::RankAgreement> TakeAgreement() { return std::move(agreement_); }

 private:
  Status Open(storage::WriterOptions options, const std::string& run_id) {
    if (options.world_size > 1) {
      Result<std::unique_ptr<storage::FileAgreement>> agreement = storage::FileAgreement::Create(
          storage::DefaultFs(), options.dir, run_id, options.rank, options.world_size);
      if (!agreement.ok()) return agreement.status();
      agreement_ = std::move(*agreement);
      options.agreement = agreement_.get();
    }
    Result<std::unique_ptr<storage::CheckpointWriter>> writer =
        storage::CheckpointWriter::Open(std::move(options));
    if (!writer.ok()) return writer.status();
    writer_ = std::move(*writer);
    return Status::Ok();
  }

  storage::CheckpointWriter& writer() {
    if (!writer_) throw py::value_error("this checkpoint writer was handed to an AsyncWriter");
    return *writer_;
  }

  std::unique_ptr<storage::RankAgreement> agreement_;  // outlives writer_
  std::unique_ptr<storage::CheckpointWriter> writer_;
};

class AsyncWriter {
 public:
  AsyncWriter(Writer& writer, storage::AsyncSaverOptions options)
      : agreement_(writer.TakeAgreement()) {
    saver_ = Unwrap(storage::AsyncSaver::Create(writer.TakeWriter(), options));
  }
  ~AsyncWriter() {
    py::gil_scoped_release release;  // waits for the save in flight
    saver_.reset();
  }

  void SaveAsync(int64_t step, const py::list& pieces, const Metadata& metadata) {
    Pieces p = ToPieces(pieces);
    ThrowIfError(WithoutGil([&] { return saver_->SaveAsync(step, p.views, metadata); }));
  }

  void Wait() {
    ThrowIfError(WithoutGil([&] { return saver_->Wait(); }));
  }

  py::dict Stats() const {
    storage::AsyncSaverStats s = saver_->stats();
    py::dict d;
    d["last_step"] = s.last_step;
    d["last_stall_seconds"] = s.last_stall_seconds;
    d["last_wait_seconds"] = s.last_wait_seconds;
    d["last_copy_seconds"] = s.last_copy_seconds;
    d["last_write_protected"] = s.last_write_protected;
    d["last_save"] = SaveStatsDict(s.last_save);
    d["staging_capacity"] = s.staging_capacity;
    d["last_copied_bytes"] = s.last_copied_bytes;
    return d;
  }

 private:
  std::unique_ptr<storage::RankAgreement> agreement_;  // outlives saver_
  std::unique_ptr<storage::AsyncSaver> saver_;
};

storage::ReaderOptions ReadOptions(bool verify, int io_threads, bool direct_io) {
  storage::ReaderOptions o;
  o.verify_on_open = verify;
  o.io_threads = io_threads;
  o.direct_io = direct_io;
  return o;
}

class Reader {
 public:
  // `step` absent: LoadLatest (the newest step that opens, falling back past bad ones).
  Reader(const std::string& dir, std::optional<int64_t> step, bool verify, int io_threads,
         bool direct_io) {
    const storage::ReaderOptions o = ReadOptions(verify, io_threads, direct_io);
    reader_ = Unwrap(WithoutGil([&] {
      return step ? storage::CheckpointReader::Open(dir, *step, o) : storage::LoadLatest(dir, o);
    }));
  }

  const storage::CheckpointReader& get() const { return *reader_; }

  py::list Tensors() const {
    py::list out;
    for (const storage::TensorInfo& t : reader_->manifest().tensors) {
      out.append(py::make_tuple(t.name, std::string(storage::DTypeName(t.dtype)), t.shape));
    }
    return out;
  }

  void Read(const std::string& tensor, const std::vector<int64_t>& offsets,
            const std::vector<int64_t>& sizes, py::handle out) const {
    Memory memory(out, /*writable=*/true);
    ThrowIfError(WithoutGil(
        [&] { return reader_->ReadSlice(tensor, offsets, sizes, memory.data(), memory.size()); }));
  }

  std::vector<std::string> VerifyAll() const {
    std::vector<std::string> warnings;
    ThrowIfError(WithoutGil([&] { return reader_->VerifyAll(&warnings); }));
    return warnings;
  }

 private:
  std::unique_ptr<storage::CheckpointReader> reader_;
};

py::list ListCheckpoints(const std::string& dir, bool verify) {
  std::vector<storage::StepInfo> steps =
      Unwrap(WithoutGil([&] { return storage::ListCheckpoints(dir, verify); }));
  py::list out;
  for (const storage::StepInfo& s : steps) {
    py::dict d;
    d["step"] = s.step;
    d["state"] = std::string(storage::StepStateName(s.state));
    d["bytes"] = s.bytes;
    d["world_size"] = s.world_size;
    d["path"] = s.path;
    d["detail"] = s.detail;
    d["latest"] = s.latest;
    out.append(d);
  }
  return out;
}

py::dict VerifyCheckpoint(const std::string& dir, std::optional<int64_t> step) {
  storage::VerifyReport r =
      Unwrap(WithoutGil([&] { return storage::VerifyCheckpoint(dir, step); }));
  py::dict d;
  d["step"] = r.step;
  d["error"] = ErrorObject(r.status);
  d["warnings"] = r.warnings;
  d["fallback_step"] = r.fallback_step;
  d["bytes_verified"] = r.bytes_verified;
  return d;
}

// ---- Packed data ----

py::dict PackStatsDict(const storage::PackStats& s) {
  py::dict d;
  d["samples"] = s.samples;
  d["bytes"] = s.bytes;
  d["shards"] = s.shards;
  d["seconds"] = s.seconds;
  d["dataset_id"] = s.dataset_id;
  return d;
}

storage::PackOptions PackOptionsOf(uint64_t shard_bytes, bool overwrite) {
  storage::PackOptions o;
  o.shard_bytes = shard_bytes;
  o.overwrite = overwrite;
  return o;
}

class DataReader {
 public:
  DataReader(const std::string& dir, const storage::DataReaderOptions& options) {
    reader_ = Unwrap(WithoutGil([&] { return storage::DataReader::Open(dir, options); }));
  }
  ~DataReader() {
    py::gil_scoped_release release;  // joins the prefetch threads
    reader_.reset();
  }

  // [(index, epoch, position, data)], data as bytes.
  py::list NextBatch(std::optional<double> timeout_s) {
    std::vector<storage::Sample> batch = Unwrap(WithoutGil([&] {
      return timeout_s ? reader_->NextBatch(base::Deadline::After(Seconds(*timeout_s)))
                       : reader_->NextBatch();
    }));
    py::list out;
    for (const storage::Sample& s : batch) {
      out.append(py::make_tuple(s.index, s.epoch, s.position, py::bytes(s.data)));
    }
    return out;
  }

  void RestorePosition(const std::string& position) {
    ThrowIfError(WithoutGil([&] { return reader_->RestorePosition(position); }));
  }

  py::bytes ReadSample(uint64_t index) const {
    if (index >= reader_->num_samples()) {
      throw py::index_error("sample " + std::to_string(index) + " is outside the dataset's " +
                            std::to_string(reader_->num_samples()) + " samples");
    }
    std::string data;
    ThrowIfError(WithoutGil([&] { return reader_->ReadSample(index, &data); }));
    return py::bytes(data);
  }

  const storage::DataReader& get() const { return *reader_; }
  storage::DataReader& get() { return *reader_; }

 private:
  std::unique_ptr<storage::DataReader> reader_;
};

}  // namespace

void RegisterStorage(py::module_& m) {
  m.def("dtype_size", [](const std::string& name) {
    return storage::DTypeSize(Unwrap(storage::ParseDType(name)));
  });

  py::class_<Writer>(m, "CheckpointWriter")
      .def(py::init([](std::string dir, int rank, int world_size, const std::string& run_id,
                       int keep_last, int io_threads, bool direct_io, double agreement_timeout_s) {
             storage::WriterOptions o;
             o.dir = std::move(dir);
             o.rank = rank;
             o.world_size = world_size;
             o.keep_last = keep_last;
             o.io_threads = io_threads;
             o.direct_io = direct_io;
             o.agreement_timeout = Seconds(agreement_timeout_s);
             return std::make_unique<Writer>(std::move(o), run_id);
           }),
           py::arg("dir"), py::arg("rank"), py::arg("world_size"), py::arg("run_id"),
           py::arg("keep_last"), py::arg("io_threads"), py::arg("direct_io"),
           py::arg("agreement_timeout_s"))
      .def("save", &Writer::Save, py::arg("step"), py::arg("pieces"), py::arg("metadata"))
      .def("last_stats", &Writer::LastStats);

  py::class_<AsyncWriter>(m, "AsyncSaver")
      .def(py::init([](Writer& writer, uint64_t max_staging_bytes, int copy_threads) {
             storage::AsyncSaverOptions o;
             o.max_staging_bytes = max_staging_bytes;
             o.copy_threads = copy_threads;
             return std::make_unique<AsyncWriter>(writer, o);
           }),
           py::arg("writer"), py::arg("max_staging_bytes"), py::arg("copy_threads"))
      .def("save_async", &AsyncWriter::SaveAsync, py::arg("step"), py::arg("pieces"),
           py::arg("metadata"))
      .def("wait", &AsyncWriter::Wait)
      .def("stats", &AsyncWriter::Stats);

  py::class_<Reader>(m, "CheckpointReader")
      .def(py::init<const std::string&, std::optional<int64_t>, bool, int, bool>(), py::arg("dir"),
           py::arg("step"), py::arg("verify"), py::arg("io_threads"), py::arg("direct_io"))
      .def_property_readonly("step", [](const Reader& r) { return r.get().step(); })
      .def_property_readonly("step_dir", [](const Reader& r) { return r.get().step_dir(); })
      .def_property_readonly("world_size",
                             [](const Reader& r) { return r.get().manifest().world_size; })
      .def_property_readonly("created", [](const Reader& r) { return r.get().manifest().created; })
      .def_property_readonly("metadata",
                             [](const Reader& r) { return r.get().manifest().metadata; })
      .def_property_readonly("fallback_notes",
                             [](const Reader& r) { return r.get().fallback_notes(); })
      .def("tensors", &Reader::Tensors)
      .def("read", &Reader::Read, py::arg("tensor"), py::arg("offsets"), py::arg("sizes"),
           py::arg("out"))
      .def("verify_all", &Reader::VerifyAll);

  m.def("list_checkpoints", &ListCheckpoints, py::arg("dir"), py::arg("verify"));
  m.def("verify_checkpoint", &VerifyCheckpoint, py::arg("dir"), py::arg("step"));

  m.def(
      "pack_directory",
      [](const std::string& src, const std::string& out, uint64_t shard_bytes, bool overwrite) {
        return PackStatsDict(Unwrap(WithoutGil([&] {
          return storage::PackDirectory(src, out, PackOptionsOf(shard_bytes, overwrite));
        })));
      },
      py::arg("src"), py::arg("out"), py::arg("shard_bytes"), py::arg("overwrite"));
  m.def(
      "pack_synthetic",
      [](const std::string& out, uint64_t samples, uint64_t min_bytes, uint64_t max_bytes,
         uint64_t seed, uint64_t shard_bytes, bool overwrite) {
        const storage::SyntheticSpec spec{
            .samples = samples, .min_bytes = min_bytes, .max_bytes = max_bytes, .seed = seed};
        return PackStatsDict(Unwrap(WithoutGil([&] {
          return storage::PackSynthetic(spec, out, PackOptionsOf(shard_bytes, overwrite));
        })));
      },
      py::arg("out"), py::arg("samples"), py::arg("min_bytes"), py::arg("max_bytes"),
      py::arg("seed"), py::arg("shard_bytes"), py::arg("overwrite"));

  py::class_<DataReader>(m, "DataReader")
      .def(py::init([](const std::string& dir, int rank, int world_size, uint64_t seed,
                       uint64_t epoch, bool shuffle, size_t batch, size_t prefetch, int threads,
                       double wait_timeout_s) {
             storage::DataReaderOptions o;
             o.rank = rank;
             o.world_size = world_size;
             o.seed = seed;
             o.epoch = epoch;
             o.shuffle = shuffle;
             o.batch = batch;
             o.prefetch = prefetch;
             o.threads = threads;
             o.wait_timeout = Seconds(wait_timeout_s);
             return std::make_unique<DataReader>(dir, o);
           }),
           py::arg("dir"), py::arg("rank"), py::arg("world_size"), py::arg("seed"),
           py::arg("epoch"), py::arg("shuffle"), py::arg("batch"), py::arg("prefetch"),
           py::arg("threads"), py::arg("wait_timeout_s"))
      .def("next_batch", &DataReader::NextBatch, py::arg("timeout_s"))
      .def("save_position", [](const DataReader& r) { return r.get().SavePosition(); })
      .def("restore_position", &DataReader::RestorePosition, py::arg("position"))
      .def("read_sample", &DataReader::ReadSample, py::arg("index"))
      .def_property_readonly("num_samples",
                             [](const DataReader& r) { return r.get().num_samples(); })
      .def_property_readonly("dataset_id", [](const DataReader& r) { return r.get().index().id(); })
      .def_property_readonly("source",
                             [](const DataReader& r) { return r.get().index().source(); });
}

}  // namespace railyard::python
