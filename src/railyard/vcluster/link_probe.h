// A TCP throughput probe between two virtual hosts: a sink that counts bytes and a sender
// that streams for a fixed time. The rate is measured at the receiver, from its first to
// its last byte, so connection set-up and the final acknowledgement do not count.
//
// Wire shape: the sender streams raw bytes, then half-closes; the sink answers with 16 bytes,
// two little-endian u64: bytes received and nanoseconds between first and last byte.
//
// This is the foundation's self-test of the virtual fabric (demo, tests); the transports of
// net/ and the fabric checks of validate/ supersede it for real measurements.
//
// Thread-safety: RunSink serves each connection on its own thread; RunSend is a plain call;
// another thread may set SinkOptions::stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::vcluster {

struct SinkOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 0;                                   // 0: any free port
  base::Duration lifetime = std::chrono::seconds(60);  // the sink exits after this
  int max_connections = 1000;                          // bounded, as every load loop
  // When set, the sink and the connections it serves end within about kSinkStopSlice of it
  // becoming true (a connection cut short gets no reply), so an owner can join its thread.
  const std::atomic<bool>* stop = nullptr;
};

// How often a sink with a stop flag looks at it.
inline constexpr base::Duration kSinkStopSlice = std::chrono::milliseconds(100);

// Serves until `lifetime` passes, max_connections were served or `stop` is set, then
// returns OK once every connection ended. `on_ready` gets "ADDR:PORT" once listening.
Status RunSink(const SinkOptions& options, const std::function<void(std::string)>& on_ready);

struct SendResult {
  uint64_t bytes = 0;
  double seconds = 0;  // receiver's first-to-last-byte time
  double bits_per_second() const { return seconds > 0 ? bytes * 8.0 / seconds : 0; }
};

// Streams for `duration` to ADDR:PORT; the whole exchange must end by `deadline`.
// UNAVAILABLE (naming the address) when the connection fails, DEADLINE_EXCEEDED when the
// sink does not answer in time.
Result<SendResult> RunSend(const std::string& address, uint16_t port, base::Duration duration,
                           base::Deadline deadline);

}  // namespace railyard::vcluster
