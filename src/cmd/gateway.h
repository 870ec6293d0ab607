// `dais gateway`: the cluster's front door (gateway/gateway.h, docs/gateway.md): KServe v2 over
// HTTP and gRPC, authenticated, rate-limited and routed by the routes and tenants in etcd to the
// nodes' READY instances. Builds with gRPC only (etcd).
#pragma once

#include <string>
#include <vector>

#include "cmd/listener_flags.h"
#include "cmd/tls_flags.h"
#include "cmd/tracing_flags.h"

namespace dais::cmd {

struct GatewayCliOptions {
  std::vector<std::string> etcd;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_threads = 0;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;  // -1: no gRPC
  int grpc_threads = 0;
  std::string jwks;
  std::string jwt_issuer;
  std::vector<std::string> jwt_audiences;
  int jwt_clock_skew_secs = 30;
  size_t jwt_cache_size = 10000;
  int grpc_connections_per_node = 0;
  std::string tenant_claim = "tenant";
  int max_tries = 3;
  double retry_budget = 0.2;
  int upstream_threads = 0;  // 0: the HTTP server's threads
  int eject_after = 5;
  std::string id;
  std::string access_log;
  double access_log_sample = 1.0;
  TracingFlags tracing;
  std::string advertise_host = "127.0.0.1";
  // TLS on the gateway's own ports, and to the nodes (docs/tls.md).
  ListenerTlsFlags http_tls, grpc_tls;
  TlsCommonFlags tls_common;
  tls::ClientConfig upstream_tls;
  ListenerLimitFlags limits;  // connections and requests (listener_flags.h)
};

CLI::App* AddGatewayCommand(CLI::App* app, GatewayCliOptions* options);
int RunGateway(const GatewayCliOptions& options);

}  // namespace dais::cmd
