#include "cmd/serve.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cmd/load_check_process.h"
#include "cmd/serve_coord.h"
#include "common/logging.h"
#include "dais/backend.h"
#include "frontends/connection_limit.h"
#include "frontends/http/http_server.h"
#include "frontends/http/kserve_http.h"
#ifdef DAIS_HAVE_GRPC
#include "frontends/grpc/kserve_grpc.h"
#endif
#include "runtime/model_manager.h"
#include "server/inference_server.h"
#include "streams/redis_feedback.h"
#include "streams/redis_labels.h"

namespace dais::cmd {

namespace {

void AddHttpFlags(CLI::App* app, ServeOptions* o) {
  app->add_option("--model-repository", o->model_repositories,
                  "Path of a model repository (Triton layout: <repo>/<model>/config.pbtxt and "
                  "<repo>/<model>/<version>/<file>). Repeatable.")
      ->required();
  app->add_option("--http-port", o->http_port,
                  "Port of the KServe v2 HTTP endpoint. 0 picks a free port; the chosen ports "
                  "are logged on one line: 'ports: http=N metrics=N grpc=N'.")
      ->capture_default_str();
  app->add_option("--http-address", o->http_address, "Address the HTTP endpoint binds.")
      ->capture_default_str();
  app->add_option("--http-thread-count", o->http_threads, "HTTP I/O threads (0: one per core).")
      ->capture_default_str();
  app->add_option("--io-busy-poll-microseconds", o->io_busy_poll_us,
                  "After each request an HTTP or gRPC I/O thread keeps polling its sockets this "
                  "long before it sleeps (0: sleeps at once). Cuts latency at light load where "
                  "waking a thread is slow (virtual machines), at the price of a core spinning "
                  "that long after each request. 0 to 100000.")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app->add_flag("--io-cpu-affinity", o->io_cpu_affinity,
                "Bind each HTTP and gRPC I/O thread to one core (thread i of each listener to "
                "the i-th core this process may use, wrapping around), as nginx's "
                "worker_cpu_affinity. HTTP and gRPC thread i share core i, and threads an I/O "
                "thread starts inherit its core. Measured without a consistent effect on 2 "
                "cores shared with the load generator (docs/memory.md, \"Threads\"); for a "
                "machine given to dais. Off by default.");
  app->add_option("--http-max-input-size,--http-max-body-bytes", o->http_max_body_bytes,
                  "Largest request body in bytes (Triton's flag name; --http-max-body-bytes is "
                  "the same), as sent and, for Content-Encoding gzip / deflate, once "
                  "decompressed; larger ones get HTTP 413. 1 byte to 4 GiB.")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4} << 30));
  app->add_option("--http-max-body-chunks", o->http_max_body_chunks,
                  "A chunked request body (Transfer-Encoding: chunked) in more chunks than this "
                  "gets HTTP 413.")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  app->add_option("--http-max-json-depth", o->http_max_json_depth,
                  "JSON bodies nested deeper than this get HTTP 400 (Triton: 100), refused as "
                  "they arrive.")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app->add_option("--http-compression-min-bytes", o->http_compression_min_bytes,
                  "Answers at least this long are compressed when the request's Accept-Encoding "
                  "allows gzip or deflate (as tritonclient's response_compression_algorithm "
                  "asks); request bodies with Content-Encoding gzip / deflate are always "
                  "accepted.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--http-restricted-api", o->http_restricted_api,
                  "<api>[,<api>...]:<key>=<value>: these API groups answer 403 unless the request "
                  "has header <key> with <value> (as tritonserver's). Groups: health, metadata, "
                  "inference, shared-memory, model-config, model-repository, statistics, trace, "
                  "logging, features (dais's Feast endpoints). Repeatable; a group in one flag "
                  "only.");
  app->add_option("--http-idle-timeout-secs", o->http_idle_timeout_secs,
                  "Seconds an HTTP connection may wait for (the rest of) its next request "
                  "before it is closed (keep-alive idle timeout).")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--metrics-port", o->metrics_port,
                  "Port of /metrics (Prometheus). Default (-1) or equal to --http-port: served "
                  "on the HTTP port. 0 picks a free port.")
      ->capture_default_str();
}

void AddGrpcFlags(CLI::App* app, ServeOptions* o) {
  app->add_option("--grpc-port", o->grpc_port,
                  "Port of the KServe v2 gRPC endpoint (inference.GRPCInferenceService, as "
                  "Triton's, plus grpc.health.v1.Health). 0 picks a free port.")
      ->capture_default_str();
  app->add_option("--allow-grpc", o->allow_grpc, "Serve the gRPC endpoint.")->capture_default_str();
  app->add_option("--grpc-address", o->grpc_address, "Address the gRPC endpoint binds.")
      ->capture_default_str();
  app->add_option("--grpc-max-message-bytes", o->grpc_max_message_bytes,
                  "Largest gRPC message received or sent.")
      ->capture_default_str();
  app->add_option("--grpc-keepalive-time", o->grpc_keepalive_time_ms,
                  "Milliseconds between keepalive pings on an idle connection.")
      ->capture_default_str();
  app->add_option("--grpc-keepalive-timeout", o->grpc_keepalive_timeout_ms,
                  "Milliseconds to wait for a keepalive ping's answer before closing.")
      ->capture_default_str();
  app->add_option("--grpc-keepalive-permit-without-calls", o->grpc_keepalive_permit_without_calls,
                  "Allow keepalive pings when no call is in flight.")
      ->capture_default_str();
  app->add_option(
         "--grpc-http2-max-pings-without-data", o->grpc_http2_max_pings_without_data,
         "Pings allowed without data before the server stops answering them (0: no limit).")
      ->capture_default_str();
  app->add_option("--grpc-restricted-protocol", o->grpc_restricted_protocol,
                  "<api>[,<api>...]:<key>=<value>: calls of these API groups end with "
                  "UNAVAILABLE unless their metadata has triton-grpc-protocol-<key> with <value> "
                  "(as tritonserver's; groups as --http-restricted-api). Repeatable.");
}

void AddModelFlags(CLI::App* app, ServeOptions* o) {
  app->add_option("--model-control-mode", o->model_control_mode,
                  "none: load every model at start, no changes afterwards; poll: also rescan "
                  "the repository every --repository-poll-secs and load new, reload changed and "
                  "unload removed versions without failing requests; explicit: load only "
                  "--load-model at start, then use the repository API "
                  "(POST /v2/repository/models/<m>/load|unload).")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  app->add_option("--repository-poll-secs", o->repository_poll_secs,
                  "Seconds between repository scans in poll mode.")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--load-model", o->load_models,
                  "Model to load at start in explicit mode; '*' loads all. Repeatable.");
  app->add_option("--strict-readiness", o->strict_readiness,
                  "true: /v2/health/ready only when every model that should be loaded is "
                  "ready; false: ready once the server is up.")
      ->capture_default_str();
  app->add_option("--exit-timeout-secs", o->exit_timeout_secs,
                  "On SIGTERM/SIGINT: readiness goes false, new inference requests are refused, "
                  "and in-flight ones get this many seconds to finish before exit.")
      ->capture_default_str();
  app->add_option("--log-verbose", o->log_verbose, "Verbose logging level (0: off, 1: more).")
      ->capture_default_str();
  app->add_option("--model-load-timeout-secs", o->model_load_timeout_secs,
                  "A model version whose load and warm-up take longer fails (UNAVAILABLE, with "
                  "the reason in the repository index); 0: no limit.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--model-load-isolation", o->model_load_isolation,
                  "process: load and warm up every new model version first in a short-lived "
                  "child process (`dais check-model`), and load it here only when that one "
                  "exited cleanly, so a model file that crashes or hangs its backend library "
                  "cannot take the server down; none: load directly; auto: process in poll and "
                  "explicit modes, none in none mode.")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "process", "none"}));
  app->add_option("--model-load-thread-count", o->model_load_threads,
                  "Models loaded in parallel at start and by a repository poll.")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void AddCoordinationFlags(CLI::App* app, ServeOptions* o) {
  app->add_option("--coordination", o->coordination,
                  "How loads of new versions are coordinated between the nodes that share a "
                  "repository (needs --redis): hierarchy (per-model, per-version and per-node "
                  "locks with fencing: nodes and models load in parallel), global (one lock for "
                  "every load in the fleet: the baseline), none; auto = hierarchy with --redis "
                  "in poll mode, else none.")
      ->check(CLI::IsMember({"auto", "hierarchy", "global", "none"}))
      ->capture_default_str();
  app->add_option("--lock-redis", o->lock_redis,
                  "Redis (or Cluster seeds) for the load locks, when they must not share the "
                  "feature store's: locks need maxmemory-policy noeviction, the feature store "
                  "wants allkeys-lfu (deploy/redis/). Default: --redis.");
  app->add_option("--lock-wait-replicas", o->lock_wait_replicas,
                  "After each lock grant, WAIT until this many replicas have it; if they do not "
                  "acknowledge in time the grant is undone and the load waits (0: off). See "
                  "deploy/redis/replication.md for what this does and does not guarantee.")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--lock-lease-ms", o->lock_lease_ms,
                  "Lease of the load locks; renewed every third of it while a load runs. A node "
                  "that dies holds nobody up for longer than this.")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace

void AddServeFlags(CLI::App* app, ServeOptions* o) {
  AddHttpFlags(app, o);
  AddGrpcFlags(app, o);
  AddListenerLimitFlags(app, &o->limits);
  AddListenerTlsFlags(app, "http", "the HTTP endpoint (HTTPS)", &o->http_tls);
  AddListenerTlsFlags(app, "grpc", "the gRPC endpoint (ALPN h2)", &o->grpc_tls);
  AddListenerTlsFlags(app, "metrics", "the separate --metrics-port", &o->metrics_tls);
  AddTlsCommonFlags(app, &o->tls_common);
  AddModelFlags(app, o);
  AddCoordinationFlags(app, o);
  AddFeatureFlags(app, &o->features);
  AddMemoryFlags(app, &o->memory);
  app->add_option("--feedback-stream", o->feedback_stream,
                  "Append every answered inference (id, model, version, inputs with the features "
                  "used, outputs, latency) to this Redis stream: redis://HOST:PORT/STREAM. Off "
                  "the request path: a bounded buffer, drops counted (docs/streams.md).");
  app->add_option("--feedback-sample", o->feedback_sample,
                  "Share of the answered inferences sent to the feedback stream.")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app->add_option("--feedback-max-len", o->feedback_max_len,
                  "The stream is capped near this many entries (XADD MAXLEN ~).")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40))
      ->capture_default_str();
  app->add_option("--feedback-buffer", o->feedback_buffer,
                  "Records waiting for Redis at most; more are dropped (counted).")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  AddTracingFlags(app, &o->tracing, "inference requests");
  app->add_option("--label-stream", o->label_stream,
                  "Take labels (outcomes known later: POST /labels, docs/learning-loop.md) into "
                  "this Redis stream: redis://HOST:PORT/STREAM. A request's labels are stored "
                  "all or none before it is answered.");
  app->add_option("--label-max-len", o->label_max_len,
                  "The label stream is capped near this many entries (XADD MAXLEN ~).")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40))
      ->capture_default_str();
}

namespace {

runtime::ModelControlMode ParseMode(const std::string& m) {
  if (m == "poll") return runtime::ModelControlMode::kPoll;
  if (m == "explicit") return runtime::ModelControlMode::kExplicit;
  return runtime::ModelControlMode::kNone;
}

runtime::ManagerOptions ManagerOptionsFrom(const ServeOptions& o) {
  runtime::ManagerOptions mo;
  mo.repositories = o.model_repositories;
  mo.mode = ParseMode(o.model_control_mode);
  mo.startup_models = o.load_models;
  mo.poll_secs = o.repository_poll_secs;
  mo.strict_readiness = o.strict_readiness;
  mo.load_threads = o.model_load_threads;
  mo.load_timeout_secs = o.model_load_timeout_secs;
  for (const std::string& name : BackendNames()) {
    if (FindBackend(name)->GpuAvailable()) mo.allow_gpu = true;
  }
  return mo;
}

// The listeners of one `dais serve`: HTTP (KServe + Feast), an optional separate metrics port
// and gRPC, all over one InferenceServer.
class Frontends {
 public:
  // The restricted-API flags, parsed; InvalidArgument naming the flag and the fault.
  struct Restrictions {
    server::ApiRestrictions http;
    server::ApiRestrictions grpc;
  };
  static StatusOr<Restrictions> ParseRestrictions(const ServeOptions& o) {
    Restrictions r;
    ASSIGN_OR_RETURN(
        r.http, server::ApiRestrictions::Parse(o.http_restricted_api, "--http-restricted-api", ""));
    ASSIGN_OR_RETURN(r.grpc, server::ApiRestrictions::Parse(o.grpc_restricted_protocol,
                                                            "--grpc-restricted-protocol",
                                                            "triton-grpc-protocol-"));
    return r;
  }

  Frontends(const ServeOptions& o, Restrictions restrictions, server::InferenceServer* server,
            FeatureRuntime* features, server::LabelSink* labels, MemoryRuntime* memory)
      : options_(o),
        grpc_restrictions_(std::move(restrictions.grpc)),
        kserve_(server, &http_ptr_,
                frontends::http::KServeHttpOptions{o.http_max_json_depth,
                                                   std::move(restrictions.http)}) {
    if (features->api() != nullptr) features->api()->set_max_json_depth(o.http_max_json_depth);
    kserve_.SetFeatures(features->api());
    kserve_.SetLabels(labels);
    if (memory != nullptr) kserve_.SetMemory(memory->api());
    memory_ = memory != nullptr ? memory->service() : nullptr;
    labels_ = labels;
  }

  // Listens on every port (health endpoints answer "not ready" while models load).
  Status Start(const frontends::DefaultConnectionLimits& limits, server::InferenceServer* server) {
    RETURN_IF_ERROR(StartHttp(limits));
    RETURN_IF_ERROR(StartMetrics(limits));
    RETURN_IF_ERROR(StartGrpc(limits, server));
    LOG_INFO("connection limits: http {} grpc {} (open files {})", http_options_.max_connections,
             options_.limits.grpc_max_connections > 0 ? options_.limits.grpc_max_connections
                                                      : limits.grpc,
             limits.open_files);
    LOG_INFO("ports: http={} metrics={} grpc={}", http_->port(),
             metrics_ ? metrics_->port() : http_->port(), GrpcPort());
    return OkStatus();
  }

  // gRPC health says NOT_SERVING (the HTTP side reads the server's drain state).
  void SetNotServing() {
#ifdef DAIS_HAVE_GRPC
    if (grpc_) grpc_->SetNotServing();
#endif
  }

  int HttpPort() const { return http_ ? http_->port() : 0; }
  ServeHooks::Ports Ports() const {
    return {HttpPort(), GrpcPort(), metrics_ ? metrics_->port() : HttpPort()};
  }
  int GrpcPort() const {
#ifdef DAIS_HAVE_GRPC
    return grpc_ ? grpc_->port() : 0;
#else
    return 0;
#endif
  }

  void Stop() {
#ifdef DAIS_HAVE_GRPC
    if (grpc_) grpc_->Stop(/*deadline_ms=*/1000);
#endif
    if (http_) http_->Stop();
    if (metrics_) metrics_->Stop();
  }

 private:
  Status StartHttp(const frontends::DefaultConnectionLimits& limits) {
    http_options_.address = options_.http_address;
    http_options_.port = options_.http_port;
    http_options_.threads = options_.http_threads;
    http_options_.busy_poll_us = static_cast<uint32_t>(options_.io_busy_poll_us);
    http_options_.cpu_affinity = options_.io_cpu_affinity;
    http_options_.max_body_bytes = static_cast<uint64_t>(options_.http_max_body_bytes);
    http_options_.max_body_chunks = static_cast<uint64_t>(options_.http_max_body_chunks);
    http_options_.max_json_depth = options_.http_max_json_depth;
    http_options_.compress_min_bytes = static_cast<uint64_t>(options_.http_compression_min_bytes);
    ApplyListenerLimits(options_.limits, options_.limits.http_max_connections, limits.http,
                        &http_options_);
    http_options_.idle_timeout_secs = options_.http_idle_timeout_secs;
    ASSIGN_OR_RETURN(http_options_.tls,
                     ListenerTls("http", options_.http_tls, options_.tls_common, {"http/1.1"}));
    http_ = std::make_unique<frontends::http::Server>(
        http_options_, [this](frontends::http::Request r, frontends::http::Responder w) {
          kserve_.Handle(std::move(r), std::move(w));
        });
    http_ptr_ = http_.get();
    return http_->Start();
  }

  Status StartMetrics(const frontends::DefaultConnectionLimits& limits) {
    if (options_.metrics_port < 0 || options_.metrics_port == options_.http_port) {
      return OkStatus();
    }
    frontends::http::ServerOptions mso = http_options_;
    mso.port = options_.metrics_port;
    mso.threads = 1;
    mso.busy_poll_us = 0;  // scrapes are not latency-bound
    mso.cpu_affinity = false;
    mso.listener = "metrics";
    mso.max_connections = limits.metrics;
    ASSIGN_OR_RETURN(
        mso.tls, ListenerTls("metrics", options_.metrics_tls, options_.tls_common, {"http/1.1"}));
    metrics_ = std::make_unique<frontends::http::Server>(
        mso, [this](frontends::http::Request r, frontends::http::Responder w) {
          kserve_.HandleMetricsOnly(std::move(r), std::move(w));
        });
    return metrics_->Start();
  }

  Status StartGrpc(const frontends::DefaultConnectionLimits& limits,
                   server::InferenceServer* server) {
#ifdef DAIS_HAVE_GRPC
    if (!options_.allow_grpc) return OkStatus();
    frontends::grpc::GrpcOptions go;
    go.address = options_.grpc_address;
    go.port = options_.grpc_port;
    go.busy_poll_us = static_cast<uint32_t>(options_.io_busy_poll_us);
    go.cpu_affinity = options_.io_cpu_affinity;
    go.max_message_bytes = options_.grpc_max_message_bytes;
    go.keepalive_time_ms = options_.grpc_keepalive_time_ms;
    go.keepalive_timeout_ms = options_.grpc_keepalive_timeout_ms;
    go.keepalive_permit_without_calls = options_.grpc_keepalive_permit_without_calls;
    go.http2_max_pings_without_data = options_.grpc_http2_max_pings_without_data;
    go.restrictions = grpc_restrictions_;
    go.labels = labels_;
    go.memory = memory_;
    ASSIGN_OR_RETURN(go.tls, ListenerTls("grpc", options_.grpc_tls, options_.tls_common, {"h2"}));
    ApplyListenerLimits(options_.limits, options_.limits.grpc_max_connections, limits.grpc, &go);
    grpc_ = std::make_unique<frontends::grpc::GrpcFrontend>(go, server);
    return grpc_->Start();
#else
    (void)limits;
    (void)server;
    if (options_.allow_grpc) LOG_WARNING("this build has no gRPC frontend; --grpc-port is ignored");
    return OkStatus();
#endif
  }

  const ServeOptions& options_;
  const server::ApiRestrictions grpc_restrictions_;
  frontends::http::Server* http_ptr_ = nullptr;
  frontends::http::KServeHttp kserve_;
  server::LabelSink* labels_ = nullptr;      // --label-stream (both protocols)
  memory::MemoryService* memory_ = nullptr;  // --memory (both protocols)
  frontends::http::ServerOptions http_options_;
  std::unique_ptr<frontends::http::Server> http_;
  std::unique_ptr<frontends::http::Server> metrics_;
#ifdef DAIS_HAVE_GRPC
  std::unique_ptr<frontends::grpc::GrpcFrontend> grpc_;
#endif
};

// Shutdown is bounded even when something cannot be stopped (a model load stuck inside its
// backend library holds the load lock that unloading needs): past the exit timeout and a grace
// for the last answers, the process leaves without running destructors.
void StartShutdownWatchdog(int exit_timeout_secs) {
  std::thread([secs = exit_timeout_secs] {
    std::this_thread::sleep_for(std::chrono::seconds(secs) + std::chrono::seconds(3));
    LOG_ERROR(
        "shutdown did not finish within --exit-timeout-secs={} (+3 s): exiting now ({} "
        "model load(s) abandoned)",
        secs, runtime::AbandonedLoads());
    std::_Exit(1);
  }).detach();
}

// SIGTERM / SIGINT: readiness false and new requests refused, in-flight ones finish (up to the
// exit timeout), queued ones are answered, then everything stops.
void Drain(const ServeOptions& o, int sig, server::InferenceServer* server,
           runtime::ModelManager* manager, CoordinationRuntime* coordination,
           Frontends* frontends) {
  LOG_INFO(
      "received {}: draining (readiness false, new requests refused, up to {}s for {} "
      "in-flight request(s))",
      sig == SIGTERM ? "SIGTERM" : "SIGINT", o.exit_timeout_secs, server->in_flight());
  server->StartDraining();
  StartShutdownWatchdog(o.exit_timeout_secs);
  frontends->SetNotServing();
  server->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(o.exit_timeout_secs));
  if (coordination) coordination->Cancel();  // no new or continued waits for load locks
  server->JoinBackground();  // repository requests (bounded by the model's load time)
  if (server->in_flight() > 0) {
    LOG_WARNING("exit timeout: {} request(s) still in flight; answering the queued ones",
                server->in_flight());
  }
  // Models first: every request still queued is answered (Unavailable) while the frontends can
  // still deliver the answer; the gRPC server's shutdown waits for every call to be finished.
  manager->Stop();
}

}  // namespace

// The feedback stream of --feedback-stream (null without it).
StatusOr<std::unique_ptr<streams::RedisFeedbackStream>> StartFeedback(const ServeOptions& o) {
  if (o.feedback_stream.empty()) return std::unique_ptr<streams::RedisFeedbackStream>();
  auto stream = streams::RedisFeedbackStream::Create(
      {o.feedback_stream, o.features.redis_tls, o.feedback_max_len, o.feedback_buffer, 256});
  if (!stream.ok())
    return InvalidArgument("--feedback-stream: " + std::string(stream.status().message()));
  LOG_INFO("feedback stream: {} (sample {})", o.feedback_stream, o.feedback_sample);
  return stream;
}

// The label stream of --label-stream (null without it).
StatusOr<std::unique_ptr<streams::RedisLabelStream>> StartLabels(const ServeOptions& o) {
  if (o.label_stream.empty()) return std::unique_ptr<streams::RedisLabelStream>();
  auto stream =
      streams::RedisLabelStream::Create({o.label_stream, o.features.redis_tls, o.label_max_len});
  if (!stream.ok())
    return InvalidArgument("--label-stream: " + std::string(stream.status().message()));
  LOG_INFO("label stream: {} (POST /labels, gRPC dais.labels.v1.Labels/Post)", o.label_stream);
  return stream;
}

// False (logged) when a --model-repository is missing: the README's first command on a clean
// checkout, where the example repositories are generated, not committed.
bool RepositoriesExist(const ServeOptions& o) {
  for (const std::string& repo : o.model_repositories) {
    std::error_code ec;
    if (std::filesystem::exists(repo, ec)) continue;
    const bool example = repo.find("examples/model_repository") != std::string::npos ||
                         repo.find("examples/feature_repository") != std::string::npos;
    LOG_ERROR("--model-repository {}: no such directory{}", repo,
              example ? " (the example repositories are generated: run scripts/gen_examples.sh, "
                        "or scripts/demo.sh, which also builds and tries them)"
                      : "");
    return false;
  }
  return true;
}

// Blocks the stop signals in every thread to come (they inherit the mask); the caller waits for
// them with sigwait. SIGPIPE is ignored.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

static std::string BackendList() {
  std::string backends;
  for (const auto& b : BackendNames()) backends += (backends.empty() ? "" : ", ") + b;
  return backends;
}

namespace {

// Vector memory (--memory; null without): the knn features search it, and a role built on
// serve (dais node) gets the service.
StatusOr<std::unique_ptr<MemoryRuntime>> StartMemory(const ServeOptions& o,
                                                     const FeatureFlags& feature_flags,
                                                     FeatureRuntime* features,
                                                     const ServeHooks* hooks) {
  ASSIGN_OR_RETURN(auto memory, MemoryRuntime::Create(o.memory, feature_flags));
  if (memory) features->enricher()->SetKnnSearch(memory->KnnSearch());
  if (hooks != nullptr && hooks->on_memory) hooks->on_memory(memory.get());
  return memory;
}

}  // namespace

// --model-load-isolation: each load checked first in a child process (or not), logged.
static void UseLoadChecker(const ServeOptions& o, const runtime::ManagerOptions& mo,
                           ProcessLoadChecker* checker, runtime::ModelManager* manager) {
  const bool isolate =
      o.model_load_isolation == "process" ||
      (o.model_load_isolation == "auto" && mo.mode != runtime::ModelControlMode::kNone);
  if (isolate) manager->SetLoadChecker(checker);
  LOG_INFO("model loads: {}, timeout {}", isolate ? "checked first in a child process" : "direct",
           o.model_load_timeout_secs > 0 ? std::to_string(o.model_load_timeout_secs) + " s"
                                         : std::string("none"));
}

int RunServe(const ServeOptions& o, const ServeHooks* hooks) {
  log::SetVerbosity(o.log_verbose);
  const sigset_t stop_signals = BlockStopSignals();

  auto restrictions = Frontends::ParseRestrictions(o);
  if (!restrictions.ok()) {
    LOG_ERROR("{}", restrictions.status().message());
    return 1;
  }
  if (!RepositoriesExist(o)) return 1;
  const runtime::ManagerOptions mo = ManagerOptionsFrom(o);
  LOG_INFO("dais serve starting: backends [{}], model control mode {}", BackendList(),
           o.model_control_mode);
  runtime::ModelManager manager(mo);
  ProcessLoadChecker checker(mo.allow_gpu, o.log_verbose);
  UseLoadChecker(o, mo, &checker, &manager);
  FeatureFlags feature_flags = o.features;
  if (feature_flags.node_id.empty()) feature_flags.node_id = DefaultNodeId();
  auto coordination = CoordinationRuntime::Create(o, feature_flags.node_id, &manager);
  if (!coordination.ok()) {
    LOG_ERROR("cannot start the load coordination: {}", coordination.status().message());
    return 1;
  }
  auto features = FeatureRuntime::Create(feature_flags, &manager);
  if (!features.ok()) {
    LOG_ERROR("cannot start the feature store: {}", features.status().message());
    return 1;
  }
  manager.SetEnricher((*features)->enricher());
  // Before the server: destroyed after it, when no request can offer a record any more.
  auto feedback = StartFeedback(o);
  auto labels = StartLabels(o);
  auto exporter = StartSpanExporter(o.tracing, "dais-node", "inference requests");
  if (!feedback.ok() || !labels.ok() || !exporter.ok()) {
    LOG_ERROR("{}", !feedback.ok() ? feedback.status().message()
                    : !labels.ok() ? labels.status().message()
                                   : exporter.status().message());
    return 2;
  }
  auto memory = StartMemory(o, feature_flags, features->get(), hooks);
  if (!memory.ok()) {
    LOG_ERROR("cannot start vector memory: {}", memory.status().message());
    return 1;
  }
  server::InferenceServer server(&manager);
  server.SetFeedback(feedback->get(), o.feedback_sample);
  if (gateway::OtlpExporter* e = exporter->get()) {
    server.SetSpanSink([e](Span span) { e->Add(std::move(span)); }, feature_flags.node_id,
                       o.tracing.trace_sample_rate);
  }
  server.SetStarting(true);  // until the offline features are in (below)
  features::FeatureStore* store = (*features)->store();
  server.SetFeatureHealth([store] { return store->Healthy(); }, (*features)->tier_name());
  Frontends frontends(o, std::move(*restrictions), &server, features->get(), labels->get(),
                      memory->get());
  // Listen first (health endpoints answer "not ready" while models load), then load.
  ApplyRequestMemoryLimit(o.limits);
  if (Status s = frontends.Start(frontends::ConnectionLimitsFromRlimit(), &server); !s.ok()) {
    LOG_ERROR("{}", s.message());
    return 1;
  }
  if (Status s = manager.Start(); !s.ok()) {
    LOG_ERROR("cannot start: {}", s.message());
    server.StartDraining();
    server.JoinBackground();  // a repository request's answer goes out before the frontends stop
    return 1;
  }
  (*features)->LoadOffline();
  server.SetStarting(false);
  LOG_INFO("dais serve ready: {}", manager.NotReady().empty()
                                       ? "all models ready"
                                       : "some models are not ready (see /healthz)");

  if (hooks != nullptr && hooks->on_ready) {
    if (Status s = hooks->on_ready(&manager, frontends.Ports()); !s.ok()) {
      LOG_ERROR("{}", s.message());
      server.StartDraining();
      manager.Stop();
      frontends.Stop();
      return 1;
    }
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (hooks != nullptr && hooks->on_stop) hooks->on_stop();
  Drain(o, sig, &server, &manager, coordination->get(), &frontends);
  coordination->reset();  // releases the locks still held
  // Give the last responses a moment to be written out before the I/O threads stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  frontends.Stop();
  features->reset();  // after the frontends: no lookup is in flight any more
  if (runtime::AbandonedLoads() > 0) {
    // Their threads may still be inside a backend library: no static destructors under them.
    LOG_WARNING("dais serve stopped with {} model load(s) abandoned at their deadline",
                runtime::AbandonedLoads());
    std::_Exit(0);
  }
  LOG_INFO("dais serve stopped");
  return 0;
}

}  // namespace dais::cmd
