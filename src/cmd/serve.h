// `dais serve`: the standalone inference server (flags named as tritonserver's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cmd/listener_flags.h"
#include "cmd/serve_features.h"
#include "cmd/serve_memory.h"
#include "cmd/tls_flags.h"
#include "cmd/tracing_flags.h"
#include "dais/status.h"

namespace dais::runtime {
class ModelManager;
}

namespace CLI {
class App;
}

namespace dais::cmd {

class MemoryRuntime;  // serve_memory.h

struct ServeOptions {
  std::vector<std::string> model_repositories;
  int http_port = 8000;
  int grpc_port = 8001;
  bool allow_grpc = true;
  std::string grpc_address = "0.0.0.0";
  int grpc_max_message_bytes = 64 << 20;
  int grpc_keepalive_time_ms = 7200000;
  int grpc_keepalive_timeout_ms = 20000;
  bool grpc_keepalive_permit_without_calls = false;
  int grpc_http2_max_pings_without_data = 2;
  int metrics_port = -1;
  std::string http_address = "0.0.0.0";
  int http_threads = 0;
  int io_busy_poll_us = 0;       // --io-busy-poll-microseconds (HTTP and gRPC I/O threads)
  bool io_cpu_affinity = false;  // --io-cpu-affinity (HTTP and gRPC I/O threads)
  int64_t http_max_body_bytes = 64ll << 20;
  int64_t http_max_body_chunks = 65536;
  int http_max_json_depth = 100;
  int64_t http_compression_min_bytes = 1024;
  std::vector<std::string> http_restricted_api;
  std::vector<std::string> grpc_restricted_protocol;
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  bool strict_readiness = true;
  int exit_timeout_secs = 30;
  int log_verbose = 0;
  int model_load_threads = 4;
  int model_load_timeout_secs = 600;
  std::string model_load_isolation = "auto";  // auto | process | none
  ListenerLimitFlags limits;                  // connections and requests (listener_flags.h)
  int http_idle_timeout_secs = 120;
  std::string coordination = "auto";
  int lock_lease_ms = 30000;
  std::string lock_redis;  // empty: --redis
  int lock_wait_replicas = 0;
  FeatureFlags features;
  MemoryFlags memory;
  // The inference feedback stream (docs/streams.md).
  std::string feedback_stream;  // redis://HOST:PORT/STREAM; empty: none
  TracingFlags tracing;         // spans of the inference requests (docs/operations.md)
  double feedback_sample = 1.0;
  size_t feedback_max_len = 100000;
  size_t feedback_buffer = 10000;
  std::string label_stream;  // redis://HOST:PORT/STREAM for POST /labels; empty: none
  size_t label_max_len = 1000000;
  // TLS per listener (docs/tls.md).
  ListenerTlsFlags http_tls, grpc_tls, metrics_tls;
  TlsCommonFlags tls_common;
};

// What a role built on `dais serve` (dais node) adds to it: called once the server is listening
// and its start-up models are loaded (a failure stops the process), and at SIGTERM before the
// drain.
struct ServeHooks {
  struct Ports {
    int http = 0;
    int grpc = 0;     // 0: no gRPC
    int metrics = 0;  // the HTTP port unless --metrics-port moved /metrics
  };
  std::function<Status(runtime::ModelManager* manager, Ports ports)> on_ready;
  std::function<void()> on_stop;
  // With --memory: the vector memory service (null without), before the listeners start.
  std::function<void(MemoryRuntime* memory)> on_memory;
};

void AddServeFlags(CLI::App* app, ServeOptions* options);
int RunServe(const ServeOptions& options, const ServeHooks* hooks = nullptr);

}  // namespace dais::cmd
