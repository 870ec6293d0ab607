// The runtime's monotonic time in nanoseconds. Not a seam: there is no fake clock behind it. Pure
// policy code (runtime/batch_queue.h) takes `now_ns` from its caller instead, which is how its
// tests control time.
#pragma once

#include <chrono>
#include <cstdint>

namespace dais {

using SteadyTime = std::chrono::steady_clock::time_point;

inline uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Wall-clock time in nanoseconds since the Unix epoch (span timestamps, records).
inline int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace dais
