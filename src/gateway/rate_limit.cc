#include "gateway/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace dais::gateway {

TokenBucket::TokenBucket(double rate, double burst, Clock::time_point now)
    : rate_(rate), burst_(std::max(burst, 1.0)), tokens_(std::max(burst, 1.0)), last_(now) {}

bool TokenBucket::Take(Clock::time_point now, std::chrono::milliseconds* retry_after) {
  MutexLock l(&mu_);
  if (rate_ <= 0) return true;
  if (now > last_) {
    tokens_ =
        std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  if (retry_after != nullptr) {
    // Bounded (a day) whatever the rate: the header must stay a small positive number.
    constexpr double kMaxMs = 86'400'000;
    *retry_after = std::chrono::milliseconds(
        static_cast<int64_t>(std::min(kMaxMs, std::ceil((1.0 - tokens_) / rate_ * 1000.0))));
  }
  return false;
}

void TokenBucket::Reset(double rate, double burst) {
  MutexLock l(&mu_);
  rate_ = rate;
  burst_ = std::max(burst, 1.0);
  tokens_ = std::min(tokens_, burst_);
}

void RetryBudget::Advance(Clock::time_point now) {
  const int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (second <= second_) return;
  for (int64_t s = std::max(second_ + 1, second - kSeconds + 1); s <= second; ++s) {
    requests_[s % kSeconds] = 0;
    retries_[s % kSeconds] = 0;
  }
  second_ = second;
}

void RetryBudget::OnRequest(Clock::time_point now) {
  MutexLock l(&mu_);
  Advance(now);
  ++requests_[second_ % kSeconds];
}

bool RetryBudget::TryRetry(Clock::time_point now) {
  MutexLock l(&mu_);
  Advance(now);
  int64_t requests = 0, retries = 0;
  for (int i = 0; i < kSeconds; ++i) {
    requests += requests_[i];
    retries += retries_[i];
  }
  if (static_cast<double>(retries) >=
      ratio_ * static_cast<double>(requests) + min_per_second_ * kSeconds) {
    return false;
  }
  ++retries_[second_ % kSeconds];
  return true;
}

}  // namespace dais::gateway
