// The posted requests of a transport, by id, and what a WaitAll hands back: each backend's
// Op (its own record of a send or receive) lives here from Post until its wait consumed it.
//
//   Op* op = table_.Add();                      // op->id is fresh, never reused
//   WaitSet<Op> w = table_.Collect(requests, "tcp transport rank 0");
//   if (!w.status.ok()) { abandon w.ops; return w.status; }   // an unknown request
//   ... table_.SetReceived(op->id, n); table_.Erase(op->id); ...
//   size_t n = table_.ReceivedBytes(request);  // until the next wait's StartWait()
//
// Ids start at 1 and only grow, so a request a wait consumed is unknown from then on
// (INVALID_ARGUMENT, "never posted or already waited"), and a request listed twice in one
// wait is waited once.
//
// Internal to net/. Thread-safety: none; guarded by the transport's own lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net::internal {

template <typename Op>
struct WaitSet {
  std::vector<Op*> ops;  // the known requests, each once, in id order
  Status status;         // INVALID_ARGUMENT naming the first unknown request, else Ok
};

// Op: default-constructible with a `uint64_t id` member.
template <typename Op>
class RequestTable {
 public:
  // A new operation with the next id. The pointer stays valid until Erase.
  Op* Add() {
    auto op = std::make_unique<Op>();
    op->id = next_id_++;
    Op* raw = op.get();
    ops_.emplace(raw->id, std::move(op));
    return raw;
  }
  Op* Find(uint64_t id) const {
    auto it = ops_.find(id);
    return it == ops_.end() ? nullptr : it->second.get();
  }
  void Erase(uint64_t id) { ops_.erase(id); }
  void Clear() { ops_.clear(); }
  size_t size() const { return ops_.size(); }
  // Calls f(Op&) for every operation, in no particular order; f must not add or erase.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [id, op] : ops_) f(*op);
  }

  // The operations `requests` name, each once. `waitable` rejects ids the table holds that
  // the caller may not wait for (a backend's internal operations, ones already given up).
  WaitSet<Op> Collect(std::span<const Request> requests, std::string_view who,
                      const std::function<bool(const Op&)>& waitable = nullptr) const {
    std::vector<uint64_t> ids;
    ids.reserve(requests.size());
    for (const Request& r : requests) ids.push_back(r.id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    WaitSet<Op> w;
    w.ops.reserve(ids.size());
    for (uint64_t id : ids) {
      Op* op = Find(id);
      if (op == nullptr || (waitable && !waitable(*op))) {
        if (w.status.ok()) {
          w.status = InvalidArgument("{}: request {} is unknown (never posted or already waited)",
                                     who, id);
        }
        continue;
      }
      w.ops.push_back(op);
    }
    return w;
  }

  // Completed receives' lengths stay readable from one wait to the start of the next.
  void StartWait() { received_.clear(); }
  void SetReceived(uint64_t id, size_t n) { received_[id] = n; }
  size_t ReceivedBytes(Request request) const {
    auto it = received_.find(request.id);
    return it == received_.end() ? 0 : it->second;
  }

 private:
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Op>> ops_;
  std::unordered_map<uint64_t, size_t> received_;
};

}  // namespace railyard::net::internal
