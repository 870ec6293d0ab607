#include "redis/redis_metrics.h"

namespace dais::redis {

RedisMetrics& RedisMetrics::Get() {
  static RedisMetrics* m = [] {
    auto& r = metrics::Registry::Global();
    auto& commands = r.AddCounter("dais_redis_commands_total",
                                  "Redis commands answered to callers, by result", {"result"});
    auto& errors =
        r.AddCounter("dais_redis_errors_total", "Redis client errors, by kind", {"kind"});
    auto& redirections = r.AddCounter("dais_redis_redirections_total",
                                      "Redis Cluster redirections followed, by type", {"type"});
    return new RedisMetrics{
        commands.Get({"ok"}),
        commands.Get({"error_reply"}),
        commands.Get({"timeout"}),
        commands.Get({"failed"}),
        errors.Get({"connect"}),
        errors.Get({"timeout"}),
        errors.Get({"protocol"}),
        errors.Get({"reply"}),
        redirections.Get({"moved"}),
        redirections.Get({"ask"}),
        r.AddCounter("dais_redis_reconnects_total", "Redis reconnection attempts", {}).Get({}),
        r.AddGauge("dais_redis_reachable", "Redis clients whose servers are all reachable", {})
            .Get({}),
    };
  }();
  return *m;
}

}  // namespace dais::redis
