#include "gateway/gateway_metrics.h"

namespace dais::gateway {

GatewayMetrics& GatewayMetrics::Get() {
  static GatewayMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Global();
    return new GatewayMetrics{
        r.AddCounter(
            "dais_gateway_requests_total",
            "Requests answered by the gateway, by route, version, tenant and HTTP status (a gRPC "
            "call under the HTTP status of the same meaning).",
            {"route", "version", "tenant", "code"}),
        r.AddHistogram("dais_gateway_request_duration_seconds",
                       "Time from a request's arrival to its answer, retries included.",
                       {"route", "version"}, metrics::FineLatencyBuckets()),
        r.AddCounter(
            "dais_gateway_upstream_requests_total",
            "Tries sent to nodes, by outcome (ok, http_5xx, grpc_error, connect_failed, timeout, "
            "error).",
            {"node", "outcome"}),
        r.AddCounter("dais_gateway_retries_total", "Tries after the first, by route.", {"route"}),
        r.AddCounter("dais_gateway_fallbacks_total",
                     "Requests answered by the route's stable version because the chosen one had "
                     "no READY instance.",
                     {"route"}),
        r.AddCounter("dais_gateway_ejections_total", "Nodes ejected after consecutive failures.",
                     {"node"}),
        r.AddCounter("dais_gateway_auth_failures_total",
                     "Requests refused with 401 (400 for reason ambiguous: several Authorization "
                     "headers), by reason.",
                     {"reason"}),
        r.AddCounter("dais_gateway_jwt_cache_lookups_total",
                     "Bearer tokens looked up in the cache of verified tokens: hit (no signature "
                     "check), miss (verified now: new, expired, refused or after a key reload).",
                     {"result"}),
        r.AddCounter("dais_gateway_rate_limited_total",
                     "Requests refused with 429 (the tenant's token bucket was empty).",
                     {"tenant"}),
        r.AddCounter(
            "dais_gateway_shadow_requests_total",
            "Mirrored copies sent to a route's shadow version (answers discarded), by "
            "outcome (ok, http_4xx, http_5xx, grpc_error, grpc_client_error, connect_failed, "
            "timeout, error, no_instance).",
            {"route", "version", "outcome"}),
        r.AddCounter("dais_gateway_config_refused_total",
                     "Route and tenant documents read from etcd that did not parse, by kind; the "
                     "last good one under the key stayed in force.",
                     {"kind"}),
        r.AddGauge("dais_gateway_grpc_streams",
                   "gRPC ModelStreamInfer streams open through the gateway to a node, by route.",
                   {"route"}),
        r.AddCounter("dais_gateway_grpc_stream_messages_total",
                     "Messages of ModelStreamInfer streams passed on, by route and direction (in: "
                     "client to node, out: node to client).",
                     {"route", "direction"}),
    };
  }();
  return *m;
}

}  // namespace dais::gateway
