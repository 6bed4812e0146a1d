#include "railyard/storage/ckpt_bench.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <thread>

#include "railyard/base/checksum.h"
#include "railyard/base/files.h"
#include "railyard/storage/agreement.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/async_saver.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {
namespace {

using base::Clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One pass over the state that rewrites every byte, as an optimizer step does; applied twice it
// restores the state.
void RewriteState(std::vector<std::span<float>>& rows) {
  for (auto& row : rows) {
    for (float& v : row) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) ^ 0x00A5A5A5u);
  }
}

// Child side: runs one rank, reporting "save <s> <stall_s> <commit_s> <write_protected>
// <touch_s>" per step, "written", then after the parent's go byte "read <s>", or
// "error <message>". Returns the exit code.
int RunRank(const CkptBenchOptions& o, int rank, int report_fd, int go_fd) {
  auto report = [&](const std::string& line) {
    std::string l = line + "\n";
    return base::WriteAll(report_fd, l, "bench report pipe").ok();
  };
  auto fail = [&](const Status& s) {
    report("error " + s.message());
    return 1;
  };
  const int64_t elems = static_cast<int64_t>(o.total_bytes / 4 / o.ranks / o.tensors);
  // The state lives in page-aligned memory, as pinned host memory (the staging of GPU
  // tensors) does, or 16 bytes past a page boundary with unaligned_state, as large malloc'ed
  // arrays do; O_DIRECT then needs a bounce copy of every extent.
  // (Not AlignedBuffer: its huge-page advice would change what write-protection costs.)
  const size_t shift = o.unaligned_state ? 16 : 0;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> memory;
  std::vector<std::span<float>> rows;
  for (int t = 0; t < o.tensors; ++t) {
    void* p = nullptr;
    if (::posix_memalign(&p, kDirectIoAlignment, static_cast<size_t>(elems) * 4 + shift) != 0) {
      return fail(ResourceExhausted("rank {}: cannot allocate the state", rank));
    }
    memory.emplace_back(p, &std::free);
    rows.emplace_back(reinterpret_cast<float*>(static_cast<uint8_t*>(p) + shift),
                      static_cast<size_t>(elems));
  }
  uint64_t x = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(rank + 1);
  for (auto& row : rows) {
    for (auto& v : row) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64: fast, not compressible
      v = static_cast<float>(x >> 40);
    }
  }
  std::vector<TensorView> views;
  for (int t = 0; t < o.tensors; ++t) {
    views.push_back(TensorView{.name = fmt::format("layer{}.weight", t),
                               .dtype = DType::kF32,
                               .shape = {o.ranks, elems},
                               .offsets = {rank, 0},
                               .sizes = {1, elems},
                               .data = rows[t].data()});
  }
  auto agreement = FileAgreement::Create(DefaultFs(), o.dir, "bench", rank, o.ranks);
  if (!agreement.ok()) return fail(agreement.status());
  WriterOptions wo;
  wo.dir = o.dir;
  wo.rank = rank;
  wo.world_size = o.ranks;
  wo.agreement = agreement->get();
  wo.direct_io = o.direct_io;
  wo.io_threads = o.io_threads;
  wo.extent_bytes = o.extent_bytes;
  wo.preallocate = o.preallocate;
  auto writer = CheckpointWriter::Open(wo);
  if (!writer.ok()) return fail(writer.status());
  std::unique_ptr<AsyncSaver> saver;
  std::unique_ptr<CheckpointWriter> sync_writer;
  if (o.async_save) {
    // A training program knows its state's size: reserve (and fault in) staging up front.
    AsyncSaverOptions ao;
    ao.snapshot = o.write_protect ? SnapshotMode::kWriteProtect : SnapshotMode::kCopy;
    for (const TensorView& v : views) {
      ao.reserve_bytes += AlignUp(v.byte_size(), kDirectIoAlignment);
    }
    auto s = AsyncSaver::Create(std::move(*writer), ao);
    if (!s.ok()) return fail(s.status());
    saver = std::move(*s);
  } else {
    sync_writer = std::move(*writer);
  }
  double touch_base = 0;
  if (o.touch) {
    std::vector<double> passes;
    for (int i = 0; i < 2; ++i) {  // even: the state is unchanged afterwards
      auto t = Clock::now();
      RewriteState(rows);
      passes.push_back(base::SecondsSince(t));
    }
    touch_base = *std::min_element(passes.begin(), passes.end());
    if (!report(fmt::format("touchbase {:.9f}", touch_base))) return 1;
  }
  for (int step = 1; step <= o.steps; ++step) {
    auto start = Clock::now();
    Status st;
    double stall = 0, touch = 0;
    bool write_protected = false;
    if (saver) {
      st = saver->SaveAsync(step, views);
      stall = base::SecondsSince(start);
      write_protected = saver->stats().last_write_protected;
      if (st.ok() && o.touch) {
        auto t = Clock::now();
        RewriteState(rows);
        touch = base::SecondsSince(t);
        stall += std::max(0.0, touch - touch_base);
      }
      if (st.ok()) st = saver->Wait();
    } else {
      st = sync_writer->Save(step, views);
      stall = base::SecondsSince(start);
    }
    if (!st.ok()) return fail(st.WithContext(fmt::format("step {}", step)));
    const SaveStats& s = saver ? saver->stats().last_save : sync_writer->last_stats();
    if (!report(fmt::format("save {:.9f} {:.9f} {:.9f} {} {:.9f}", base::SecondsSince(start), stall,
                            s.commit_seconds, write_protected ? 1 : 0, touch))) {
      return 1;
    }
  }
  if (o.touch && o.steps > 0) RewriteState(rows);  // back to the state of the last save
  if (!report("written")) return 1;
  // The restore's destination exists before the restore, as a model's tensors do: aligned, as
  // pinned or page-aligned tensors are, so O_DIRECT reads land in place (fio's buffers are
  // aligned too), and faulted in outside the timed part.
  AlignedBuffer back;
  if (Status st = back.Resize(static_cast<size_t>(elems) * sizeof(float)); !st.ok()) {
    return fail(st);
  }
  back.Prefault();
  char go = 0;
  if (::read(go_fd, &go, 1) != 1) return 1;  // parent gone
  auto start = Clock::now();
  ReaderOptions ro;
  ro.verify_on_open = false;  // ReadSlice verifies what it reads
  ro.direct_io = o.direct_io;
  auto reader = LoadLatest(o.dir, ro);
  if (!reader.ok()) return fail(reader.status());

  const std::vector<int64_t> offsets = {rank, 0}, sizes = {1, elems};
  double read_s = base::SecondsSince(start);  // open; then only the reads count, not the check
  for (int t = 0; t < o.tensors; ++t) {
    auto read_start = Clock::now();
    Status st = (*reader)->ReadSlice(views[t].name, offsets, sizes, back.data(), back.size());
    read_s += base::SecondsSince(read_start);
    if (!st.ok()) return fail(st);
    if (std::memcmp(back.data(), rows[t].data(), back.size()) != 0) {
      return fail(
          DataLoss("rank {}: {} read back differs from what was saved", rank, views[t].name));
    }
  }
  report(fmt::format("read {:.9f}", read_s));
  return 0;
}

struct RankProc {
  pid_t pid = -1;
  base::UniqueFd report;  // parent reads
  base::UniqueFd go;      // parent writes
  std::string buffer;
  std::vector<double> save_s, stall_s, commit_s, touch_s;
  bool all_write_protected = true;
  double touch_base_s = 0;
  double read_s = 0;
  bool written = false, done = false;
  std::string error;
};

bool DropCaches() {
  ::sync();
  FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("3\n", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

Result<CkptBenchResult> RunCkptBench(const CkptBenchOptions& o) {
  if (o.ranks < 1 || o.ranks > 256)
    return InvalidArgument("--ranks {}: expected 1 to 256", o.ranks);
  if (o.steps < 1) return InvalidArgument("--steps {}: expected at least 1", o.steps);
  if (o.tensors < 1) return InvalidArgument("tensors {}: expected at least 1", o.tensors);
  if (o.total_bytes < uint64_t{4} * o.ranks * o.tensors * 1024) {
    return InvalidArgument(
        "--size {} bytes is too small for {} ranks x {} tensors (at least 4 KiB "
        "per rank and tensor)",
        o.total_bytes, o.ranks, o.tensors);
  }
  if (o.dir.empty()) return InvalidArgument("--dir is required");
  if (o.io_threads < 1 || o.io_threads > 256) {
    return InvalidArgument("--io-threads {}: expected 1 to 256", o.io_threads);
  }
  if (o.extent_bytes < kDirectIoAlignment || o.extent_bytes % kDirectIoAlignment != 0) {
    return InvalidArgument("--extent {} bytes: expected a multiple of {}", o.extent_bytes,
                           kDirectIoAlignment);
  }
  std::error_code ec;
  if (std::filesystem::exists(o.dir, ec) && !std::filesystem::is_empty(o.dir, ec)) {
    return InvalidArgument(
        "--dir '{}' is not empty; the benchmark writes into a fresh directory "
        "and removes it afterwards",
        o.dir);
  }
  RY_RETURN_IF_ERROR(base::MakeDirs(o.dir));
  std::vector<RankProc> procs(o.ranks);
  for (int r = 0; r < o.ranks; ++r) {
    int rep[2], go[2];
    if (::pipe2(rep, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) {
      return ErrnoStatus(errno, "bench ckpt: pipe");
    }
    pid_t pid = ::fork();
    if (pid < 0) return ErrnoStatus(errno, "bench ckpt: fork");
    if (pid == 0) {
      ::close(rep[0]);
      ::close(go[1]);
      std::_Exit(RunRank(o, r, rep[1], go[0]));
    }
    ::close(rep[1]);
    ::close(go[0]);
    procs[r].pid = pid;
    procs[r].report.Reset(rep[0]);
    procs[r].go.Reset(go[1]);
  }
  // Kill every rank on any early return.
  struct Reaper {
    std::vector<RankProc>* procs;
    ~Reaper() {
      for (auto& p : *procs) {
        if (p.pid > 0) {
          ::kill(p.pid, SIGKILL);
          ::waitpid(p.pid, nullptr, 0);
        }
      }
    }
  } reaper{&procs};
  auto cleanup = [&] { std::filesystem::remove_all(o.dir, ec); };

  const base::Deadline deadline = base::Deadline::After(o.timeout);
  CkptBenchResult result;
  bool read_phase = false;
  auto all = [&](auto pred) { return std::all_of(procs.begin(), procs.end(), pred); };
  while (!all([](const RankProc& p) { return p.done; })) {
    if (!read_phase && all([](const RankProc& p) { return p.written; })) {
      read_phase = true;
      if (!o.drop_caches) {
        result.notes.push_back("page cache not dropped (asked not to): reads may come from memory");
      } else if (::geteuid() == 0 && DropCaches()) {
        result.notes.push_back("page cache dropped before the read phase");
      } else {
        result.notes.push_back("page cache not dropped (needs root): reads may come from memory");
      }
      if (o.read_settle.count() > 0) {
        // A measurement condition, not synchronisation: see CkptBenchOptions::read_settle.
        std::this_thread::sleep_for(o.read_settle);
        result.notes.push_back(fmt::format(
            "reads started {} ms after the drop",
            std::chrono::duration_cast<std::chrono::milliseconds>(o.read_settle).count()));
      }
      for (auto& p : procs) {
        char go = 1;
        if (::write(p.go.get(), &go, 1) != 1) return Internal("bench ckpt: cannot start reads");
      }
    }
    std::vector<pollfd> fds;
    for (auto& p : procs) fds.push_back({p.report.valid() ? p.report.get() : -1, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), deadline.PollTimeoutMs());
    if (n == 0) {
      cleanup();
      for (int r = 0; r < o.ranks; ++r) {
        if (!procs[r].done) {
          return DeadlineExceeded("bench ckpt: rank {} did not finish within the timeout", r);
        }
      }
    }
    if (n < 0 && errno != EINTR) return ErrnoStatus(errno, "bench ckpt: poll");
    for (int r = 0; r < o.ranks; ++r) {
      RankProc& p = procs[r];
      if (!(fds[r].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t got = ::read(p.report.get(), buf, sizeof buf);
      if (got > 0) {
        p.buffer.append(buf, static_cast<size_t>(got));
      }
      size_t nl;
      while ((nl = p.buffer.find('\n')) != std::string::npos) {
        std::string line = p.buffer.substr(0, nl);
        p.buffer.erase(0, nl + 1);
        std::istringstream in(line);
        std::string word;
        in >> word;
        if (word == "save") {
          double s = 0, stall = 0, commit = 0, touch = 0;
          int write_protected = 0;
          in >> s >> stall >> commit >> write_protected >> touch;
          p.all_write_protected = p.all_write_protected && write_protected == 1;
          p.touch_s.push_back(touch);
          p.save_s.push_back(s);
          p.stall_s.push_back(stall);
          p.commit_s.push_back(commit);
        } else if (word == "touchbase") {
          in >> p.touch_base_s;
        } else if (word == "written") {
          p.written = true;
        } else if (word == "read") {
          in >> p.read_s;
        } else if (word == "error") {
          p.error = line.substr(6);
        }
      }
      if (got <= 0) {
        p.report.Reset();
        int status = 0;
        ::waitpid(p.pid, &status, 0);
        p.pid = -1;
        p.done = true;
        if (!p.error.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          cleanup();
          std::string why = !p.error.empty() ? p.error
                            : WIFSIGNALED(status)
                                ? fmt::format("killed by signal {}", WTERMSIG(status))
                                : fmt::format("exited with {}", WEXITSTATUS(status));
          return Internal("bench ckpt: rank {} failed: {}", r, why);
        }
      }
    }
  }
  std::vector<double> save, stall, commit;
  for (int s = 0; s < o.steps; ++s) {
    double worst = 0, worst_stall = 0, worst_commit = 0;
    for (const auto& p : procs) {
      if (static_cast<int>(p.save_s.size()) <= s) return Internal("bench ckpt: missing step data");
      worst = std::max(worst, p.save_s[s]);
      worst_stall = std::max(worst_stall, p.stall_s[s]);
      worst_commit = std::max(worst_commit, p.commit_s[s]);
    }
    save.push_back(worst);
    stall.push_back(worst_stall);
    commit.push_back(worst_commit);
  }
  result.commit_ms = Median(commit) * 1e3;
  if (o.async_save) {
    bool protect = true;
    std::vector<double> touch, base;
    for (const auto& p : procs) {
      protect = protect && p.all_write_protected;
      for (double t : p.touch_s) touch.push_back(t);
      base.push_back(p.touch_base_s);
    }
    result.touch_base_ms = Median(base) * 1e3;
    result.snapshot = protect ? "protect" : "copy";
    if (o.write_protect && !protect) {
      result.notes.push_back("write-protection unavailable, saves copied (see the log)");
    }
    if (o.touch) result.touch_ms = Median(touch) * 1e3;
  }
  double read = 0;
  for (const auto& p : procs) read = std::max(read, p.read_s);
  const int64_t elems = static_cast<int64_t>(o.total_bytes / 4 / o.ranks / o.tensors);
  result.bytes = static_cast<uint64_t>(elems) * 4 * o.ranks * o.tensors;
  result.ranks = o.ranks;
  result.steps = o.steps;
  result.save_ms = Median(save) * 1e3;
  result.stall_ms = Median(stall) * 1e3;
  result.write_gbps = result.save_ms > 0 ? result.bytes / (result.save_ms / 1e3) / 1e9 : 0;
  result.read_gbps = read > 0 ? result.bytes / read / 1e9 : 0;
  cleanup();
  return result;
}

nlohmann::json ToJson(const CkptBenchResult& r) {
  nlohmann::json j = {
      {"write_gbps", r.write_gbps}, {"read_gbps", r.read_gbps}, {"save_ms", r.save_ms},
      {"stall_ms", r.stall_ms},     {"bytes", r.bytes},         {"ranks", r.ranks},
      {"steps", r.steps},           {"commit_ms", r.commit_ms}, {"notes", r.notes}};
  j["xxh3"] = std::string(base::Xxh3Implementation());
  if (!r.snapshot.empty()) j["snapshot"] = r.snapshot;
  if (r.touch_ms > 0) {
    j["touch_ms"] = r.touch_ms;
    j["touch_base_ms"] = r.touch_base_ms;
  }
  return j;
}

}  // namespace railyard::storage
