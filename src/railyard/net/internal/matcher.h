// Matching of posted receives against arrived messages, per (peer, tag) in order: the rule
// of transport.h ("a receive matches the oldest unmatched message of its (peer, tag)"), kept
// once for every backend that matches messages itself (tcp, shm; ofi's provider matches).
//
// A backend calls TakeMessage when a receive is posted and TakeRecv when a message arrives
// (for tcp: is announced on stream 0); whichever finds nothing queues its side:
//
//   if (std::optional<Msg> m = matcher.TakeMessage(peer, tag)) Deliver(*m, recv);
//   else matcher.AddRecv(peer, tag, recv);
//
// For one (peer, tag), receives wait only while no message does and vice versa, so each
// side's queue is the FIFO the contract needs. Recv and Msg are small values (ids,
// pointers) or move-only handles.
//
// Internal to net/. Thread-safety: none; the transport's progress thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>

#include "railyard/net/transport.h"

namespace railyard::net::internal {

template <typename Recv, typename Msg>
class Matcher {
 public:
  // The oldest receive of (peer, tag) still waiting for a message, taken out; nullopt if none.
  std::optional<Recv> TakeRecv(int peer, Tag tag) { return Take(peer, tag, &Queues::recvs); }
  // The oldest message of (peer, tag) still waiting for a receive, taken out; nullopt if none.
  std::optional<Msg> TakeMessage(int peer, Tag tag) { return Take(peer, tag, &Queues::msgs); }

  // Precondition: TakeMessage(peer, tag) just found nothing.
  void AddRecv(int peer, Tag tag, Recv recv) {
    queues_[{peer, tag}].recvs.push_back(std::move(recv));
  }
  // Precondition: TakeRecv(peer, tag) just found nothing.
  void AddMessage(int peer, Tag tag, Msg msg) {
    queues_[{peer, tag}].msgs.push_back(std::move(msg));
  }

  // Removes a waiting receive whose caller gave up; false when it was not waiting.
  bool RemoveRecv(int peer, Tag tag, const Recv& recv) {
    auto it = queues_.find({peer, tag});
    if (it == queues_.end()) return false;
    auto& q = it->second.recvs;
    for (auto r = q.begin(); r != q.end(); ++r) {
      if (*r == recv) {
        q.erase(r);
        if (q.empty() && it->second.msgs.empty()) queues_.erase(it);
        return true;
      }
    }
    return false;
  }

  bool empty() const { return queues_.empty(); }

 private:
  struct Key {
    int peer;
    Tag tag;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.tag * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(k.peer));
    }
  };
  struct Queues {
    std::deque<Recv> recvs;
    std::deque<Msg> msgs;
  };

  template <typename T>
  std::optional<T> Take(int peer, Tag tag, std::deque<T> Queues::*side) {
    auto it = queues_.find({peer, tag});
    if (it == queues_.end() || (it->second.*side).empty()) return std::nullopt;
    std::optional<T> out(std::move((it->second.*side).front()));
    (it->second.*side).pop_front();
    if (it->second.recvs.empty() && it->second.msgs.empty()) queues_.erase(it);
    return out;
  }

  std::unordered_map<Key, Queues, KeyHash> queues_;
};

}  // namespace railyard::net::internal
