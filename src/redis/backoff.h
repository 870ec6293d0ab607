// Reconnect backoff shared by Connection and Subscriber: capped exponential with jitter, so that
// many connections lost at once (a restarted server) do not all come back in the same instant.
//
// The waits are min, 2·min, 4·min, ... capped at max (ClientOptions::reconnect_backoff_min/max),
// each multiplied by a uniform factor in [0.8, 1.2). Reset() after a success starts over at min.
// Policy only: no clock and no timer; the caller waits.
//
// Thread-safety: none (one per connection, used on its I/O thread).
#pragma once

#include <chrono>
#include <random>
#include <string_view>

#include "redis/options.h"

namespace dais::redis {

class Backoff {
 public:
  static constexpr double kJitterMin = 0.8;
  static constexpr double kJitterMax = 1.2;

  // `seed` drives the jitter (inject a fixed one in tests; see SeedFor).
  Backoff(const ClientOptions& options, unsigned seed);

  // The wait before the next attempt; doubles the nominal wait for the one after (up to max).
  std::chrono::milliseconds Next();
  // After a success: the next wait is min (jittered) again.
  void Reset() { nominal_ = min_; }
  // The un-jittered wait Next() will use.
  std::chrono::milliseconds nominal() const { return nominal_; }

  // A seed that differs between connections (by `salt`, e.g. the address) and between runs.
  static unsigned SeedFor(std::string_view salt);

 private:
  const std::chrono::milliseconds min_, max_;
  std::chrono::milliseconds nominal_;
  std::minstd_rand rng_;
};

}  // namespace dais::redis
