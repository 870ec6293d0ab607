#include "server/inference_server.h"

#include <random>
#include <thread>

#include "dais/clock.h"
#include "dais/datatype.h"
#include "runtime/tensor_config.h"

namespace dais::server {
namespace {

TensorMetadata TensorMeta(const std::string& name, inference::DataType type,
                          const google::protobuf::RepeatedField<int64_t>& dims, bool batching) {
  TensorMetadata t;
  t.name = name;
  t.datatype = std::string(DataTypeName(runtime::ConfigDataType(type)));
  if (batching) t.shape.push_back(-1);
  t.shape.insert(t.shape.end(), dims.begin(), dims.end());
  return t;
}

// What a failed load / unload answers with: the client can tell a missing model, a retryable
// condition, a refused switch and a bad model apart.
Status RepositoryFailure(RepositoryAction action, const std::string& model, const Status& s) {
  StatusCode code = StatusCode::kInvalidArgument;
  switch (s.code()) {
    case StatusCode::kNotFound:
      code = StatusCode::kNotFound;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      code = StatusCode::kUnavailable;  // a lock wait or a lost lease: try again
      break;
    case StatusCode::kFailedPrecondition:
      code = StatusCode::kAborted;  // fencing refused the switch (a newer one was applied)
      break;
    default:
      break;
  }
  const char* what = action == RepositoryAction::kLoad ? "failed to load '" : "failed to unload '";
  return Status(code, what + model + "': " + s.message());
}

}  // namespace

const std::vector<const char*>& ServerExtensions() {
  static const std::vector<const char*> kExtensions = {"binary_tensor_data", "model_repository",
                                                       "statistics", "model_configuration"};
  return kExtensions;
}

InFlight::InFlight(std::atomic<int64_t>* count) {
  count->fetch_add(1);
  guard_ = std::shared_ptr<void>(
      count, [](void* c) { static_cast<std::atomic<int64_t>*>(c)->fetch_sub(1); });
}

Status InferenceServer::Ready() const {
  if (draining()) return FailedPrecondition("server is shutting down");
  if (starting_.load()) return FailedPrecondition("server is starting");
  if (!manager_->Ready()) return FailedPrecondition("server is not ready");
  return OkStatus();
}

HealthReport InferenceServer::Health() const {
  HealthReport h;
  h.models_not_ready = manager_->NotReady();
  h.draining = draining();
  h.has_feature_store = static_cast<bool>(tier_healthy_);
  h.feature_store_ok = !tier_healthy_ || tier_healthy_();
  h.feature_tier = tier_name_;
  h.ok = h.models_not_ready.empty() && !h.draining && h.feature_store_ok;
  return h;
}

bool InferenceServer::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  while (in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return in_flight() == 0;
}

Status InferenceServer::AcceptingInference() const {
  if (draining()) {
    return Unavailable("server is shutting down; not accepting new inference requests");
  }
  return OkStatus();
}

StatusOr<InFlight> InferenceServer::Admit() {
  if (draining()) return Unavailable("server is shutting down");
  InFlight token(&in_flight_);
  // Checked again: a drain that began in between must not miss this request in its count.
  if (draining()) return Unavailable("server is shutting down");
  return token;
}

Status InferenceServer::ModelReady(const std::string& model, int64_t version) const {
  auto mv = manager_->Find(model, version);
  if (mv.ok() || mv.status().code() == StatusCode::kNotFound) return mv.status();
  return FailedPrecondition(mv.status().message());
}

StatusOr<ModelMetadata> InferenceServer::Metadata(const std::string& model, int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<runtime::ModelVersion> mv, manager_->Find(model, version));
  const inference::ModelConfig& config = mv->config();
  const bool batching = config.max_batch_size() > 0;
  ModelMetadata m;
  m.name = model;
  if (version >= 0) {
    m.versions.push_back(std::to_string(version));
  } else {
    for (int64_t v : manager_->ReadyVersions(model)) m.versions.push_back(std::to_string(v));
  }
  m.platform = config.platform().empty() ? config.backend() : config.platform();
  m.max_batch_size = config.max_batch_size();
  for (const auto& in : config.input()) {
    m.inputs.push_back(TensorMeta(in.name(), in.data_type(), in.dims(), batching));
  }
  for (const auto& out : config.output()) {
    m.outputs.push_back(TensorMeta(out.name(), out.data_type(), out.dims(), batching));
  }
  return m;
}

StatusOr<std::vector<VersionStatistics>> InferenceServer::Statistics(const std::string& model,
                                                                     int64_t version) const {
  std::vector<std::string> names;
  if (model.empty()) {
    for (const runtime::IndexEntry& e : manager_->Index(/*ready_only=*/true)) {
      if (names.empty() || names.back() != e.name) names.push_back(e.name);
    }
  } else {
    names.push_back(model);
  }
  std::vector<VersionStatistics> out;
  for (const std::string& name : names) {
    std::vector<int64_t> versions =
        version >= 0 ? std::vector<int64_t>{version} : manager_->ReadyVersions(name);
    if (!model.empty() && versions.empty()) {
      // Why it has none (unknown, not ready); a version that became ready since is taken.
      auto latest = manager_->Find(name, -1);
      if (!latest.ok()) return latest.status();
      versions.push_back((*latest)->version());
    }
    for (int64_t v : versions) {
      auto mv = manager_->Find(name, v);
      if (!mv.ok()) {
        if (!model.empty()) return mv.status();
        continue;  // all models: one that is not loaded has no statistics
      }
      out.push_back(VersionStatistics{name, std::move(*mv)});
    }
  }
  return out;
}

Status InferenceServer::Repository(RepositoryAction action, const std::string& model,
                                   bool has_parameters, std::function<void(Status)> done) {
  if (manager_->mode() != runtime::ModelControlMode::kExplicit) {
    // Unavailable, as Triton answers (HTTP 503, gRPC UNAVAILABLE): this server does not take
    // repository control now; another (or this one restarted in explicit mode) may.
    return Unavailable(
        "explicit model load / unload is not allowed unless --model-control-mode=explicit");
  }
  if (has_parameters && action == RepositoryAction::kLoad) {
    return InvalidArgument("load parameters (config / file overrides) are not supported by dais");
  }
  ASSIGN_OR_RETURN(InFlight token, Admit());
  // Loading can take seconds: not on an I/O thread.
  background_.Run(
      [this, action, model, done = std::move(done), token = std::move(token)]() mutable {
        Status s = action == RepositoryAction::kLoad ? manager_->LoadModel(model)
                                                     : manager_->UnloadModel(model);
        done(s.ok() ? s : RepositoryFailure(action, model, s));
        token = InFlight();  // answered
      });
  return OkStatus();
}

namespace {

bool Sampled(double share) {
  if (share >= 1) return true;
  if (share <= 0) return false;
  thread_local std::mt19937_64 rng(std::random_device{}());
  return static_cast<double>(rng() >> 11) * 0x1.0p-53 < share;
}

}  // namespace

std::shared_ptr<Span> InferenceServer::BeginSpan(const runtime::InferenceRequest& r) const {
  auto span = std::make_shared<Span>();
  span->trace_id = r.trace_id;
  span->parent_id = r.parent_span_id;
  span->span_id = NewSpanId();
  span->name = "infer " + r.model_name;
  span->start_unix_ns = UnixNs();
  return span;
}

void InferenceServer::EndSpan(Span span, const runtime::InferenceRequest& r,
                              const StatusOr<runtime::ResponsePtr>& result) const {
  span.end_unix_ns = UnixNs();
  const StatusCode code = result.ok() ? StatusCode::kOk : result.status().code();
  // An error of the server's (not of the request: those are the caller's to fix).
  span.error = code == StatusCode::kInternal || code == StatusCode::kUnavailable ||
               code == StatusCode::kDeadlineExceeded || code == StatusCode::kResourceExhausted;
  span.string_attributes = {{"dais.model", r.model_name},
                            {"dais.node", span_node_},
                            {"dais.request_id", r.id},
                            {"dais.status", std::string(StatusCodeName(code))}};
  if (!result.ok()) span.string_attributes.emplace_back("dais.error", result.status().message());
  span.int_attributes = {{"dais.batch_size", r.batch_size}};
  if (result.ok() && *result != nullptr) {
    span.string_attributes.emplace_back("dais.version", (*result)->model_version);
  }
  span_sink_(std::move(span));
}

void InferenceServer::Infer(runtime::RequestPtr request, InferDone done) {
  auto token = Admit();
  if (!token.ok()) return done(AcceptingInference(), InFlight());
  // Inline execution is for light load: only when this is the one request in the server. With
  // others in flight, batches of one on the I/O threads cost throughput (measured on mlp_small
  // at concurrency 16: 14-28 % fewer requests/s) and the queue batches them better.
  if (request->may_run_inline && in_flight_.load(std::memory_order_relaxed) > 1) {
    request->may_run_inline = false;
  }
  // The request is alive while its on_complete runs (the model calls it as the request's
  // member): the feedback record reads its inputs, the enriched features included.
  runtime::InferenceRequest* raw = request.get();
  FeedbackSink* sink = feedback_ != nullptr && Sampled(feedback_sample_) ? feedback_ : nullptr;
  std::shared_ptr<Span> span;
  if (span_sink_ && request->trace_id.empty() && span_sample_rate_ > 0 &&
      Sampled(span_sample_rate_)) {
    request->trace_id = NewTraceId();
    request->trace_sampled = true;
  }
  if (span_sink_ && request->trace_sampled) span = BeginSpan(*request);
  request->on_complete = [this, done = std::move(done), token = std::move(*token), raw, sink,
                          span = std::move(span)](StatusOr<runtime::ResponsePtr> result) {
    if (sink != nullptr && result.ok() && *result != nullptr) {
      sink->Offer(MakeFeedbackRecord(*raw, **result, NowNs()));
    }
    if (span) EndSpan(std::move(*span), *raw, result);
    done(std::move(result), token);
  };
  manager_->Infer(std::move(request));
}

}  // namespace dais::server
