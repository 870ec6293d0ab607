// The process's budget for bytes of requests that are still arriving (issue 32: 8 gRPC
// connections each holding an unfinished 64 MiB message pinned +539 MB; nothing bounded the sum).
// Every listener of the process (HTTP bodies, gRPC request messages not yet handed to a method)
// reserves what it buffers here before it reads more; a request that does not fit is refused at
// once (HTTP 503, gRPC RESOURCE_EXHAUSTED) and the connection stops reading it. A request that is
// complete is the handler's and no longer counted (queues and batching bound those).
//
// Metrics: dais_request_buffered_bytes (gauge), dais_request_buffered_bytes_max,
// dais_request_buffer_refused_total{listener}.
//
// Thread-safe (one atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace dais::frontends {

class RequestMemory {
 public:
  // The process's budget.
  static RequestMemory& Global();
  // Default: an eighth of physical memory (at least 256 MiB).
  static uint64_t DefaultLimit();

  void set_limit(uint64_t bytes);
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

  // Takes `bytes` from the budget; false (and nothing taken, a refusal counted for `listener`)
  // when they do not fit.
  bool TryReserve(uint64_t bytes, const std::string& listener);
  void Release(uint64_t bytes);

 private:
  RequestMemory();
  std::atomic<uint64_t> limit_;
  std::atomic<uint64_t> used_{0};
};

// What one request holds of the budget; released when destroyed or on Release().
class RequestReservation {
 public:
  RequestReservation() = default;
  ~RequestReservation() { Release(); }
  RequestReservation(const RequestReservation&) = delete;
  RequestReservation& operator=(const RequestReservation&) = delete;
  // Grows what is held to at least `bytes`; false when the budget refuses (what was held stays).
  bool Hold(uint64_t bytes, const std::string& listener);
  void Release();
  uint64_t held() const { return held_; }

 private:
  uint64_t held_ = 0;
};

}  // namespace dais::frontends
