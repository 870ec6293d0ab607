#include "redis/backoff.h"

#include <algorithm>
#include <functional>
#include <string>

namespace dais::redis {

Backoff::Backoff(const ClientOptions& options, unsigned seed)
    : min_(options.reconnect_backoff_min),
      max_(options.reconnect_backoff_max),
      nominal_(min_),
      rng_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  const double jitter = std::uniform_real_distribution<double>(kJitterMin, kJitterMax)(rng_);
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(nominal_.count() * jitter));
  nominal_ = std::min(nominal_ * 2, max_);
  return wait;
}

unsigned Backoff::SeedFor(std::string_view salt) {
  return static_cast<unsigned>(std::hash<std::string_view>()(salt) ^
                               std::chrono::steady_clock::now().time_since_epoch().count());
}

}  // namespace dais::redis
