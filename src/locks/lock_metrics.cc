#include "locks/lock_metrics.h"

#include <string>

namespace dais::locks::internal {

namespace {

LockMetrics* Make(LockLevel level) {
  auto& r = metrics::Registry::Global();
  const std::vector<std::string> l = {std::string(LockLevelName(level))};
  auto& wait = r.AddHistogram("dais_lock_wait_seconds",
                              "Time from an acquire call to the grant, by lock level", {"level"},
                              metrics::LatencyBuckets());
  auto& hold = r.AddHistogram(
      "dais_lock_hold_seconds", "Time a lease was held, grant to release or loss, by lock level",
      {"level"}, {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600});
  auto& renewals = r.AddCounter("dais_lock_renewals_total",
                                "Successful lease renewals, by lock level", {"level"});
  auto& failures =
      r.AddCounter("dais_lock_renewal_failures_total",
                   "Failed lease renewals (refused or no answer), by lock level", {"level"});
  auto& expirations = r.AddCounter(
      "dais_lock_expirations_total",
      "Leases whose holder-side deadline passed without a successful renewal, by lock level",
      {"level"});
  auto& lost =
      r.AddCounter("dais_lock_lost_total", "Leases lost while held, by lock level", {"level"});
  auto& fencing =
      r.AddCounter("dais_lock_fencing_rejections_total",
                   "Operations rejected for carrying a stale fencing token, by level", {"level"});
  return new LockMetrics{wait.Get(l),        hold.Get(l), renewals.Get(l), failures.Get(l),
                         expirations.Get(l), lost.Get(l), fencing.Get(l)};
}

}  // namespace

LockMetrics& LockMetrics::For(LockLevel level) {
  static LockMetrics* model = Make(LockLevel::kModel);
  static LockMetrics* version = Make(LockLevel::kVersion);
  static LockMetrics* node = Make(LockLevel::kNode);
  switch (level) {
    case LockLevel::kModel:
      return *model;
    case LockLevel::kVersion:
      return *version;
    case LockLevel::kNode:
      return *node;
  }
  return *model;
}

}  // namespace dais::locks::internal
