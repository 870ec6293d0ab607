// The gateway's Prometheus metrics (docs/gateway.md lists them).
#pragma once

#include "metrics/registry.h"

namespace dais::gateway {

struct GatewayMetrics {
  metrics::Family<metrics::Counter>& requests;         // {route, version, tenant, code}
  metrics::Family<metrics::Histogram>& duration;       // {route, version}, seconds
  metrics::Family<metrics::Counter>& upstream;         // {node, outcome}
  metrics::Family<metrics::Counter>& retries;          // {route}
  metrics::Family<metrics::Counter>& fallbacks;        // {route}
  metrics::Family<metrics::Counter>& ejections;        // {node}
  metrics::Family<metrics::Counter>& auth_failures;    // {reason}
  metrics::Family<metrics::Counter>& jwt_cache;        // {result}: hit | miss
  metrics::Family<metrics::Counter>& rate_limited;     // {tenant}
  metrics::Family<metrics::Counter>& shadow;           // {route, version, outcome}
  metrics::Family<metrics::Counter>& config_refused;   // {kind}: route | tenant
  metrics::Family<metrics::Gauge>& grpc_streams;       // {route}: open ModelStreamInfer streams
  metrics::Family<metrics::Counter>& stream_messages;  // {route, direction}: in | out

  static GatewayMetrics& Get();
};

}  // namespace dais::gateway
