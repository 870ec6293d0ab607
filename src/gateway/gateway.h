// The gateway role (`dais gateway`, docs/gateway.md): KServe v2 over HTTP in front of the nodes.
// Per request: authenticate (a bearer JWT -> tenant; off without --jwks), check the tenant's
// models and token bucket (403 / 429 with Retry-After), pick a version by the alias's route
// (path version, A/B rule, sticky hash or weights; route.h), pick a node among the READY
// instances of that version (power of two choices, outlier ejection; balancer.h), forward the
// request with only the path rewritten (/v2/models/<alias>/... -> /v2/models/<model>/versions/
// <v>/...; the body passes as bytes), and retry on another node when the connection failed or the
// node answered 503, within the route's timeout and the retry budget. When the version has no
// READY instance the route's stable version answers, marked `x-dais-fallback`.
//
// Routes, tenants, nodes and instance states come from etcd watches (the request path never
// waits for etcd): with etcd away the gateway routes with what it last saw.
//
// Threading: Handle runs on the HTTP server's I/O threads and answers from the upstream pool's
// threads; the watches update a view that requests take by shared_ptr.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"
#include "frontends/grpc/h2_connection.h"
#include "frontends/http/http_server.h"
#include "gateway/balancer.h"
#include "gateway/jwt.h"
#include "tls/context.h"

namespace boost::asio {
class io_context;
}

namespace dais::gateway {

struct GatewayOptions {
  std::vector<std::string> etcd_endpoints;
  std::string jwks_path;  // empty: no authentication (every request is tenant "anonymous")
  JwtPolicy jwt;
  size_t jwt_cache_size = 10000;  // verified tokens remembered (jwt_cache.h); 0: none
  std::string tenant_claim = "tenant";
  int max_tries = 3;          // tries per request, the first included
  double retry_budget = 0.2;  // retries as a share of recent requests
  int upstream_threads = 2;
  // HTTP/2 connections per node for the gRPC calls, per I/O thread: a call goes out on the thread
  // that received it (grpc_upstream.h); 0: one.
  int grpc_connections_per_node = 0;
  BalancerOptions balancer;
  // JSON access log, one line per request: a file path, "-" for stdout, empty for none. Every
  // 5xx answer is logged; other answers with probability access_log_sample.
  // Tracing (docs/operations.md): spans of sampled requests to an OTLP/HTTP collector
  // ("http://host:4318"; empty: none). A request without a traceparent starts a trace sampled
  // with probability trace_sample_rate; one with a traceparent keeps its sampled flag.
  std::string otlp_endpoint;
  double trace_sample_rate = 0;
  std::string access_log;
  double access_log_sample = 1.0;
  // TLS to the nodes (their --http-use-ssl / --grpc-use-ssl[-mutual]): both upstreams use it.
  tls::SslCtxPtr upstream_tls;
  std::string upstream_tls_name;  // empty: each node's host
};

class Gateway {
 public:
  // `io` (borrowed, may be null): the io_context of the HTTP server that calls Handle; requests
  // to the nodes then run on its threads. Null: the gateway runs threads of its own for them.
  explicit Gateway(GatewayOptions options, boost::asio::io_context* io = nullptr);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Loads the JWKS (an unreadable or invalid file is an error) and starts the etcd watches
  // (etcd away is not: the gateway is not ready until it has seen the cluster once).
  Status Start();
  void Stop();
  // Registers /dais/gateways/<id> = {"http": endpoint} under a lease of 10 s (renewed), so that
  // the rollout analysis finds this gateway's /metrics. Call after Start.
  void Register(const std::string& id, const std::string& http_endpoint);
  // The frontends::http::Handler.
  void Handle(frontends::http::Request request, frontends::http::Responder respond);
  // The gRPC methods (grpc_proxy.cc) for a frontends::grpc::H2Server: the model methods of
  // inference.GRPCInferenceService routed like HTTP, ModelStreamInfer pinned to one node per
  // stream, ServerLive / ServerReady / ServerMetadata and grpc.health.v1 answered here.
  frontends::grpc::MethodTable GrpcMethods();
  // Closes the gRPC connections to the nodes: for the gRPC server's stop, once its calls ended
  // and before its I/O threads (which run those connections) are joined.
  void CloseGrpcConnections();
  // True once every watch delivered its first snapshot, until StartDraining.
  bool Ready() const;
  // Readiness false from now on (load balancers stop sending); requests still served.
  void StartDraining();
  // Waits until no request is in flight or `deadline`; false at the deadline.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  int64_t InFlight() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::gateway
