// The fencing check at the protected resource (docs/locks.md, "Fencing"): remembers the highest
// fencing token seen per key and rejects an operation that carries a lower one. E.g. a node's
// table of active model versions, keyed by model: a holder whose lease was lost (paused past it,
// Redis restarted, lock broken) still carries its old token, and its late switch is rejected
// because a newer holder already applied a higher one.
//
// Tokens equal to the highest are accepted (one holder doing several operations under one
// grant). Rejections count in dais_lock_fencing_rejections_total{level}.
//
// Thread-safety: thread-safe. The check and the effect of Apply are atomic with respect to every
// other call on the same table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "dais/status.h"
#include "locks/lock_types.h"

namespace dais::locks {

class FencedTable {
 public:
  // `level` only labels the rejection metric.
  explicit FencedTable(LockLevel level = LockLevel::kModel);

  // Records `token` for `key` if it is >= the highest seen (OK), else FailedPrecondition naming
  // both tokens (the caller's lock is stale: it must stop).
  Status Check(std::string_view key, int64_t token);
  // As Check, and runs `effect` (under the table's mutex: keep it short) only when accepted.
  // Rejected: the effect does not run.
  Status Apply(std::string_view key, int64_t token, const std::function<void()>& effect);
  // The highest token seen for `key` (0 = none).
  int64_t Highest(std::string_view key) const;

 private:
  Status CheckLocked(std::string_view key, int64_t token) DAIS_REQUIRES(mu_);

  const LockLevel level_;
  mutable Mutex mu_;
  std::map<std::string, int64_t, std::less<>> highest_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::locks
