#include "locks/fenced_table.h"

#include <fmt/format.h>

#include "locks/lock_metrics.h"

namespace dais::locks {

FencedTable::FencedTable(LockLevel level) : level_(level) {}

Status FencedTable::CheckLocked(std::string_view key, int64_t token) {
  auto it = highest_.find(key);
  if (it == highest_.end()) {
    highest_.emplace(std::string(key), token);
    return OkStatus();
  }
  if (token < it->second) {
    internal::LockMetrics::For(level_).fencing_rejections.Increment();
    return FailedPrecondition(
        fmt::format("stale fencing token {} for '{}': {} was already seen (the lock was lost)",
                    token, key, it->second));
  }
  it->second = token;
  return OkStatus();
}

Status FencedTable::Check(std::string_view key, int64_t token) {
  MutexLock l(&mu_);
  return CheckLocked(key, token);
}

Status FencedTable::Apply(std::string_view key, int64_t token,
                          const std::function<void()>& effect) {
  MutexLock l(&mu_);
  RETURN_IF_ERROR(CheckLocked(key, token));
  if (effect) effect();
  return OkStatus();
}

int64_t FencedTable::Highest(std::string_view key) const {
  MutexLock l(&mu_);
  auto it = highest_.find(key);
  return it == highest_.end() ? 0 : it->second;
}

}  // namespace dais::locks
