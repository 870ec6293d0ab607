// The client's Prometheus metrics in the global registry (see docs/redis-client.md, "Metrics").
// Shared by every Client in the process. Thread-safety: the references are safe from any thread.
#pragma once

#include "metrics/registry.h"

namespace dais::redis {

struct RedisMetrics {
  // dais_redis_commands_total{result="ok|error_reply|timeout|failed"}: commands answered to
  // callers (a batch of n counts n).
  metrics::Counter& ok;
  metrics::Counter& error_reply;
  metrics::Counter& timeout;
  metrics::Counter& failed;
  // dais_redis_errors_total{kind="connect|timeout|protocol|reply"}.
  metrics::Counter& connect_errors;
  metrics::Counter& timeout_errors;
  metrics::Counter& protocol_errors;
  metrics::Counter& reply_errors;
  // dais_redis_redirections_total{type="moved|ask"}.
  metrics::Counter& moved;
  metrics::Counter& ask;
  // dais_redis_reconnects_total: connection attempts after the first one of a connection.
  metrics::Counter& reconnects;
  // dais_redis_reachable: number of Clients in this process that are Reachable() (1/0 with one).
  metrics::Gauge& reachable;

  static RedisMetrics& Get();
};

}  // namespace dais::redis
