// Prometheus metrics of the lock service (global registry), one child set per level.
#pragma once

#include "locks/lock_types.h"
#include "metrics/registry.h"

namespace dais::locks::internal {

struct LockMetrics {
  metrics::Histogram& wait;  // dais_lock_wait_seconds: Acquire/TryAcquire call to grant
  metrics::Histogram& hold;  // dais_lock_hold_seconds: grant to release or loss
  metrics::Counter& renewals;
  metrics::Counter& renewal_failures;
  metrics::Counter& expirations;  // holder-side deadline passed without a renewal
  metrics::Counter& lost;         // every loss: deadline, renewal refused, service destroyed
  metrics::Counter& fencing_rejections;

  // The children for `level`, resolved once.
  static LockMetrics& For(LockLevel level);
};

}  // namespace dais::locks::internal
