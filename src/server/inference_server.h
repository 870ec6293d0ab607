// The server's operations, without a protocol around them: what the HTTP and gRPC frontends (and
// later `dais node`) call. A frontend parses its request, calls one operation here and encodes the
// answer; every rule of the server lives here once: readiness, drain and in-flight accounting,
// the repository API's conditions (explicit mode, no load parameters, not while draining, off the
// I/O thread), the selection of statistics and the codes a failed load answers with.
//
// Errors are dais Status codes with a message naming what was wrong; each frontend turns a Status
// into its protocol's code in one function (frontends/http/http_status.h, grpc_codec.h).
//
// Thread-safety: every operation may be called from any thread. Callbacks (`done`) run on a
// runtime or background thread, or on the caller's thread when the request is refused at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/trace_context.h"
#include "dais/status.h"
#include "runtime/inference_request.h"
#include "runtime/model_manager.h"
#include "server/background.h"
#include "server/feedback.h"

namespace dais::server {

inline constexpr const char* kServerName = "dais";
inline constexpr const char* kServerVersion = "0.1.0";
// Protocol extensions both frontends implement (ServerMetadata / GET /v2).
const std::vector<const char*>& ServerExtensions();

// Held while a request is being answered; copies share one count. Drain waits until every
// InFlight is gone, so a frontend keeps it until its answer is handed to the transport.
class InFlight {
 public:
  InFlight() = default;

 private:
  friend class InferenceServer;
  explicit InFlight(std::atomic<int64_t>* count);
  std::shared_ptr<void> guard_;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;        // KServe name: "FP32", "BYTES", ...
  std::vector<int64_t> shape;  // -1 first when the model batches
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  int64_t max_batch_size = 0;  // > 0: the inputs' and outputs' first dimension is the batch
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

struct VersionStatistics {
  std::string name;
  std::shared_ptr<runtime::ModelVersion> version;  // ModelVersion::stats() holds the counters
};

// GET /healthz: why the server is or is not healthy.
struct HealthReport {
  bool ok = false;
  std::vector<std::pair<std::string, std::string>> models_not_ready;  // model, reason
  bool has_feature_store = false;
  bool feature_store_ok = true;
  std::string feature_tier;  // "redis", "memory"
  bool draining = false;
};

enum class RepositoryAction { kLoad, kUnload };

class InferenceServer {
 public:
  // `manager` is borrowed and must outlive this object.
  explicit InferenceServer(runtime::ModelManager* manager) : manager_(manager) {}
  ~InferenceServer() { background_.JoinAll(); }
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // The online feature tier's reachability, reported by Health(). Call before serving.
  void SetFeatureHealth(std::function<bool()> tier_healthy, std::string tier_name) {
    tier_healthy_ = std::move(tier_healthy);
    tier_name_ = std::move(tier_name);
  }

  // --- Health -----------------------------------------------------------------------------
  // OK when every model that should be ready is and the server is not draining; else
  // FailedPrecondition naming why (Triton answers 400 to a server that is not ready).
  Status Ready() const;
  HealthReport Health() const;

  // --- Drain ------------------------------------------------------------------------------
  // From now on readiness is false and new inference, feature and repository requests are
  // refused (Unavailable). Requests already admitted go on.
  void StartDraining() { draining_.store(true); }
  // While true, readiness is false whatever the models: the process's start-up work after the
  // model loads (the offline feature import) is not done, and a client that waits for
  // readiness must not see a half-filled feature store. Set by the role that owns start-up.
  void SetStarting(bool starting) { starting_.store(starting); }
  bool draining() const { return draining_.load(); }
  int64_t in_flight() const { return in_flight_.load(); }
  // Waits until no request is in flight or `deadline` passes; true if none is.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;
  // Joins the threads running repository requests (after StartDraining: no new ones start).
  void JoinBackground() { background_.JoinAll(); }
  // OK, or Unavailable while draining: a frontend may refuse a request before decoding it.
  Status AcceptingInference() const;
  // Admits a request of another kind (Feast endpoints): Unavailable "server is shutting down"
  // while draining, else a token to hold until it is answered.
  StatusOr<InFlight> Admit();

  // --- Models -----------------------------------------------------------------------------
  // A ready version (-1: the highest). NotFound for an unknown model, Unavailable when the
  // model or version is not ready.
  StatusOr<std::shared_ptr<runtime::ModelVersion>> Find(const std::string& model,
                                                        int64_t version) const {
    return manager_->Find(model, version);
  }
  // OK when ready; NotFound for an unknown model; FailedPrecondition when it is not ready.
  Status ModelReady(const std::string& model, int64_t version) const;
  StatusOr<ModelMetadata> Metadata(const std::string& model, int64_t version) const;

  // --- Statistics -------------------------------------------------------------------------
  // `model` empty: every loaded model (`version` >= 0: that version of each, where loaded).
  // `model` given: its ready versions (or `version`); an error when it has none.
  StatusOr<std::vector<VersionStatistics>> Statistics(const std::string& model,
                                                      int64_t version) const;

  // --- Repository -------------------------------------------------------------------------
  std::vector<runtime::IndexEntry> Index(bool ready_only) const {
    return manager_->Index(ready_only);
  }
  // Refused at once (the status is returned, `done` never runs) unless the server runs in
  // explicit mode (FailedPrecondition), the load has no parameters (InvalidArgument) and the
  // server is not draining (Unavailable). Else OK, and the load / unload runs on a background
  // thread, then `done` runs there with its result: NotFound (no such model), Unavailable
  // (retryable: a lock wait or a lost lease), Aborted (fencing refused the switch) or
  // InvalidArgument (the model is bad), each message naming the model.
  Status Repository(RepositoryAction action, const std::string& model, bool has_parameters,
                    std::function<void(Status)> done);

  // --- Inference --------------------------------------------------------------------------
  using InferDone = std::function<void(StatusOr<runtime::ResponsePtr> result, InFlight in_flight)>;
  // Runs `request` (enriched with features when its model declares them) and answers through
  // `done` exactly once: Unavailable at once while draining, else from the model's thread.
  // `request->on_complete` is set here.
  void Infer(runtime::RequestPtr request, InferDone done);

  // The feedback stream (feedback.h): a share `sample` (0 to 1) of the answered inferences is
  // offered to `sink` (borrowed; outlives the server's requests), built on the model's thread
  // before the answer goes out. Null: none. Call before serving.
  void SetFeedback(FeedbackSink* sink, double sample) {
    feedback_ = sink;
    feedback_sample_ = sample;
  }
  // Tracing (docs/operations.md, "Tracing"): a request whose traceparent is sampled gets a span
  // of this server (child of the caller's, from Infer to the answer) handed to `sink` on the
  // model's thread; one without a traceparent starts a trace, sampled with probability
  // `sample_rate`. `node` names this server in the spans. Call before serving.
  void SetSpanSink(std::function<void(Span)> sink, std::string node, double sample_rate) {
    span_sink_ = std::move(sink);
    span_node_ = std::move(node);
    span_sample_rate_ = sample_rate;
  }

 private:
  std::shared_ptr<Span> BeginSpan(const runtime::InferenceRequest& r) const;
  void EndSpan(Span span, const runtime::InferenceRequest& r,
               const StatusOr<runtime::ResponsePtr>& result) const;

  runtime::ModelManager* manager_;
  std::function<bool()> tier_healthy_;
  std::string tier_name_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> starting_{false};
  std::atomic<int64_t> in_flight_{0};
  BackgroundTasks background_;  // repository load / unload requests
  FeedbackSink* feedback_ = nullptr;
  double feedback_sample_ = 1.0;
  std::function<void(Span)> span_sink_;
  std::string span_node_;
  double span_sample_rate_ = 0;
};

}  // namespace dais::server
