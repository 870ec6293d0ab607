// Clock seam: the runtime reads time through this so tests can use a fake clock.
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

}  // namespace dais
