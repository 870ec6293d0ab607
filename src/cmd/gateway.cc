#include "cmd/gateway.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>

#include "common/logging.h"
#include "frontends/grpc/h2_server.h"
#include "frontends/http/http_server.h"
#include "gateway/gateway.h"

namespace dais::cmd {

CLI::App* AddGatewayCommand(CLI::App* app, GatewayCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "gateway",
      "The cluster's front door: KServe v2 over HTTP and gRPC, JWT-authenticated, rate-limited per "
      "tenant, routed by the routes in etcd (weights, sticky users, A/B rules, stable fallback) "
      "to the nodes' READY instances, with retries and outlier ejection");
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated or repeated).")
      ->delimiter(',')
      ->required()
      ->envname("DAIS_ETCD");
  cmd->add_option("--http-address", o->http_address, "Address the HTTP port binds.")
      ->capture_default_str();
  cmd->add_option("--http-port", o->http_port, "HTTP port (0: a free one, logged as 'ports:').")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--http-thread-count", o->http_threads, "HTTP I/O threads (0: one per core).")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--grpc-address", o->grpc_address, "Address the gRPC port binds.")
      ->capture_default_str();
  cmd->add_option("--grpc-port", o->grpc_port,
                  "gRPC port (inference.GRPCInferenceService; 0: a free one; -1: no gRPC).")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--grpc-thread-count", o->grpc_threads, "gRPC I/O threads (0: one per core).")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--id", o->id, "This gateway's name in etcd (default: host name and PID).");
  AddListenerTlsFlags(cmd, "http", "the gateway's HTTP port (HTTPS)", &o->http_tls);
  AddListenerTlsFlags(cmd, "grpc", "the gateway's gRPC port (ALPN h2)", &o->grpc_tls);
  AddTlsCommonFlags(cmd, &o->tls_common);
  AddClientTlsFlags(cmd, "upstream",
                    "the nodes (HTTPS and gRPC over TLS; mutual TLS with --upstream-tls-cert)",
                    &o->upstream_tls);
  cmd->add_option("--advertise-host", o->advertise_host,
                  "Host the rollout analysis reaches this gateway's /metrics at.")
      ->capture_default_str();
  cmd->add_option("--jwks", o->jwks,
                  "JWKS file of the keys that sign bearer tokens (each key pins its alg: HS256, "
                  "RS256 or ES256); reloaded when it changes. Without it authentication is off.");
  cmd->add_option("--jwt-issuer", o->jwt_issuer, "Required 'iss' of tokens (default: any).");
  cmd->add_option("--jwt-audience", o->jwt_audiences,
                  "Accepted 'aud' values (repeatable; default: any).");
  cmd->add_option("--jwt-clock-skew-secs", o->jwt_clock_skew_secs, "Tolerance on exp / nbf / iat.")
      ->check(CLI::Range(0, 600))
      ->capture_default_str();
  cmd->add_option("--jwt-cache-size", o->jwt_cache_size,
                  "Verified tokens remembered until they expire, so a client reusing its token "
                  "pays the signature check once (0: verify every request). A JWKS reload "
                  "verifies every token anew.")
      ->check(CLI::Range(size_t{0}, size_t{10000000}))
      ->capture_default_str();
  cmd->add_option("--tenant-claim", o->tenant_claim, "The token claim that names the tenant.")
      ->capture_default_str();
  cmd->add_option("--max-tries", o->max_tries,
                  "Tries per request, the first included (a refused connection or a 503 is "
                  "tried on another node).")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  cmd->add_option("--retry-budget", o->retry_budget,
                  "Retries may add at most this share of the requests of the last 10 s.")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--upstream-threads", o->upstream_threads,
                  "Threads of their own for the HTTP connections to the nodes, an io_context each "
                  "(the gRPC ones then run on the first); 0: the HTTP threads (a request goes "
                  "out from the thread that received it).")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--access-log", o->access_log,
                  "JSON access log, one line per request: a file (appended) or '-' for stdout.");
  cmd->add_option("--grpc-connections-per-node", o->grpc_connections_per_node,
                  "HTTP/2 connections to each node for the gRPC calls, per I/O thread (a call "
                  "goes out on the thread that received it), taken in turn; 0: one.")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  AddTracingFlags(cmd, &o->tracing, "requests");
  cmd->add_option("--access-log-sample", o->access_log_sample,
                  "Share of successful requests logged (every 5xx is).")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--eject-after", o->eject_after,
                  "Consecutive failures that eject a node (1 s, doubling up to 30 s).")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  AddListenerLimitFlags(cmd, &o->limits);
  return cmd;
}

// The gateway library's options from the flags (TLS to the nodes aside).
static gateway::GatewayOptions GatewayOptionsOf(const GatewayCliOptions& o) {
  gateway::GatewayOptions go;
  go.etcd_endpoints = o.etcd;
  go.jwks_path = o.jwks;
  go.jwt.issuer = o.jwt_issuer;
  go.jwt.audiences = o.jwt_audiences;
  go.jwt.clock_skew = std::chrono::seconds(o.jwt_clock_skew_secs);
  go.jwt_cache_size = o.jwt_cache_size;
  go.grpc_connections_per_node = o.grpc_connections_per_node;
  go.tenant_claim = o.tenant_claim;
  go.max_tries = o.max_tries;
  go.retry_budget = o.retry_budget;
  go.upstream_threads = o.upstream_threads;
  go.balancer.eject_after = o.eject_after;
  go.access_log = o.access_log;
  go.access_log_sample = o.access_log_sample;
  go.otlp_endpoint = o.tracing.otlp_endpoint;
  go.trace_sample_rate = o.tracing.trace_sample_rate;
  return go;
}

int RunGateway(const GatewayCliOptions& o) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  gateway::GatewayOptions go = GatewayOptionsOf(o);
  if (o.upstream_tls.active()) {
    auto ctx = tls::MakeClientContext(o.upstream_tls);
    if (!ctx.ok()) {
      LOG_ERROR("dais gateway: --upstream-tls: {}", ctx.status().message());
      return 2;
    }
    go.upstream_tls = *ctx;
    go.upstream_tls_name = o.upstream_tls.server_name;
  }
  auto http_tls = ListenerTls("http", o.http_tls, o.tls_common, {"http/1.1"});
  auto grpc_tls = ListenerTls("grpc", o.grpc_tls, o.tls_common, {"h2"});
  for (const auto* t : {&http_tls, &grpc_tls}) {
    if (!t->ok()) {
      LOG_ERROR("dais gateway: {}", t->status().message());
      return 2;
    }
  }
  ApplyRequestMemoryLimit(o.limits);
  const frontends::DefaultConnectionLimits limits = frontends::ConnectionLimitsFromRlimit();
  frontends::http::ServerOptions so;
  ApplyListenerLimits(o.limits, o.limits.http_max_connections, limits.http, &so);
  so.tls = *http_tls;
  so.address = o.http_address;
  so.port = o.http_port;
  so.threads = o.http_threads;
  so.listener = "gateway";
  gateway::Gateway* handler = nullptr;  // set before the server starts
  frontends::http::Server http(
      so, [&handler](frontends::http::Request r, frontends::http::Responder w) {
        handler->Handle(std::move(r), std::move(w));
      });
  // Requests to the nodes go out on the HTTP threads (no hand-off) unless threads are asked for.
  gateway::Gateway gw(go, o.upstream_threads > 0 ? nullptr : &http.io_context());
  handler = &gw;
  if (Status s = gw.Start(); !s.ok()) {
    LOG_ERROR("dais gateway: {}", s.message());
    return 2;
  }
  if (Status s = http.Start(); !s.ok()) {
    LOG_ERROR("dais gateway: --http-port: {}", s.message());
    return 2;
  }
  std::unique_ptr<frontends::grpc::H2Server> grpc;
  if (o.grpc_port >= 0) {
    frontends::grpc::H2ServerOptions go2;
    ApplyListenerLimits(o.limits, o.limits.grpc_max_connections, limits.grpc, &go2);
    go2.tls = *grpc_tls;
    go2.address = o.grpc_address;
    go2.port = o.grpc_port;
    go2.threads = o.grpc_threads;
    go2.before_join = [&gw] { gw.CloseGrpcConnections(); };  // they run on its threads
    grpc = std::make_unique<frontends::grpc::H2Server>(go2, gw.GrpcMethods());
    if (Status s = grpc->Start(); !s.ok()) {
      LOG_ERROR("dais gateway: --grpc-port: {}", s.message());
      http.Stop();  // its threads run the node connections' io_contexts: joined before gw goes
      return 2;
    }
    LOG_INFO("ports: http={} grpc={}", http.port(), grpc->port());
  } else {
    LOG_INFO("ports: http={}", http.port());
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  gw.Register(o.id.empty() ? std::string(host) + "-" + std::to_string(getpid()) : o.id,
              o.advertise_host + ":" + std::to_string(http.port()));
  LOG_INFO("dais gateway started (etcd {})", o.etcd.front());
  int sig = 0;
  sigwait(&stop, &sig);
  LOG_INFO("dais gateway: received {}: draining ({} request(s) in flight, up to 30 s)",
           sig == SIGINT ? "SIGINT" : "SIGTERM", gw.InFlight());
  gw.StartDraining();
  http.StopAccepting();
  if (grpc) grpc->Stop(30000);  // GOAWAY: open calls finish (up to 30 s)
  if (!gw.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30))) {
    LOG_WARNING("dais gateway: {} request(s) still in flight after 30 s: stopping anyway",
                gw.InFlight());
  }
  http.Stop();
  gw.Stop();
  return 0;
}

}  // namespace dais::cmd
