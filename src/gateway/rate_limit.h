// Token buckets for the gateway's tenants, and its retry budget.
//
// TokenBucket: `rate` tokens a second up to `burst`; Take answers whether a request may go and,
// when not, how long until a token is there (the 429's Retry-After). A rate of 0 or less means
// no limit.
//
// Thread-safety: TokenBucket is thread-safe (one small lock).
#pragma once

#include <chrono>

#include "common/mutex.h"

namespace dais::gateway {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double rate, double burst, Clock::time_point now);
  // True when a token was taken; else *retry_after is the wait until one is there.
  bool Take(Clock::time_point now, std::chrono::milliseconds* retry_after = nullptr);
  // Changes the rate and burst (a tenant's spec changed), keeping the tokens (capped).
  void Reset(double rate, double burst);

 private:
  Mutex mu_;
  double rate_ DAIS_GUARDED_BY(mu_);
  double burst_ DAIS_GUARDED_BY(mu_);
  double tokens_ DAIS_GUARDED_BY(mu_);
  Clock::time_point last_ DAIS_GUARDED_BY(mu_);
};

// Retries may add at most `ratio` of the requests of the last 10 s, plus `min_per_second`: when
// a whole node dies, its requests go elsewhere; when every node fails, retries do not multiply
// the load (Envoy's and gRPC's retry budgets).
class RetryBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RetryBudget(double ratio = 0.2, double min_per_second = 10)
      : ratio_(ratio), min_per_second_(min_per_second) {}
  void OnRequest(Clock::time_point now);
  // True (and counted) when one more retry fits the budget.
  bool TryRetry(Clock::time_point now);

 private:
  static constexpr int kSeconds = 10;
  void Advance(Clock::time_point now) DAIS_REQUIRES(mu_);
  const double ratio_;
  const double min_per_second_;
  Mutex mu_;
  int64_t second_ DAIS_GUARDED_BY(mu_) = 0;  // the current bucket's second
  int64_t requests_[kSeconds] DAIS_GUARDED_BY(mu_) = {};
  int64_t retries_[kSeconds] DAIS_GUARDED_BY(mu_) = {};
};

}  // namespace dais::gateway
