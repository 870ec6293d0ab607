#include "frontends/request_memory.h"

#include <unistd.h>

#include <algorithm>

#include "metrics/registry.h"

namespace dais::frontends {

namespace {

struct Metrics {
  metrics::Gauge& used;
  metrics::Gauge& limit;
  metrics::Family<metrics::Counter>& refused;
};

Metrics& M() {
  static Metrics* m = [] {
    auto& r = metrics::Registry::Global();
    return new Metrics{
        r.AddGauge("dais_request_buffered_bytes",
                   "Bytes of requests still arriving, buffered by the process's listeners", {})
            .Get({}),
        r.AddGauge("dais_request_buffered_bytes_max",
                   "The process's budget for them (--max-buffered-request-bytes)", {})
            .Get({}),
        r.AddCounter("dais_request_buffer_refused_total",
                     "Requests refused because the budget for buffered request bytes was spent "
                     "(HTTP 503, gRPC RESOURCE_EXHAUSTED)",
                     {"listener"})};
  }();
  return *m;
}

}  // namespace

RequestMemory& RequestMemory::Global() {
  static RequestMemory* g = new RequestMemory();
  return *g;
}

uint64_t RequestMemory::DefaultLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t total = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : (8ull << 30);
  return std::max<uint64_t>(256ull << 20, total / 8);
}

RequestMemory::RequestMemory() : limit_(DefaultLimit()) {
  M().limit.Set(static_cast<double>(limit_.load()));
}

void RequestMemory::set_limit(uint64_t bytes) {
  limit_.store(bytes, std::memory_order_relaxed);
  M().limit.Set(static_cast<double>(bytes));
}

bool RequestMemory::TryReserve(uint64_t bytes, const std::string& listener) {
  const uint64_t limit = limit_.load(std::memory_order_relaxed);
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit || used > limit - bytes) {
      M().refused.Get({listener}).Increment();
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  M().used.Add(static_cast<double>(bytes));
  return true;
}

void RequestMemory::Release(uint64_t bytes) {
  if (bytes == 0) return;
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  M().used.Add(-static_cast<double>(bytes));
}

bool RequestReservation::Hold(uint64_t bytes, const std::string& listener) {
  if (bytes <= held_) return true;
  if (!RequestMemory::Global().TryReserve(bytes - held_, listener)) return false;
  held_ = bytes;
  return true;
}

void RequestReservation::Release() {
  RequestMemory::Global().Release(held_);
  held_ = 0;
}

}  // namespace dais::frontends
