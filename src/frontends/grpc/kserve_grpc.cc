#include "frontends/grpc/kserve_grpc.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <charconv>
#include <deque>

#include "common/logging.h"
#include "dais/clock.h"
#include "frontends/grpc/grpc_codec.h"
#include "grpc_service.grpc.pb.h"
#include "runtime/tensor_config.h"

namespace dais::grpcfe {
namespace {

using inference::GRPCInferenceService;

grpc::Status Bad(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

// Parses an optional version string ("" -> -1).
bool ParseVersion(const std::string& s, int64_t* v) {
  *v = -1;
  if (s.empty()) return true;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *v >= 0;
}

void FillStats(const std::string& name, const ModelVersion& mv, inference::ModelStatistics* out) {
  const ModelStats& s = mv.stats();
  out->set_name(name);
  out->set_version(std::to_string(mv.version()));
  out->set_last_inference(s.last_inference_ms.load());
  out->set_inference_count(s.inference_count.load());
  out->set_execution_count(s.execution_count.load());
  auto dur = [](const DurationStat& d, inference::StatisticDuration* o) {
    o->set_count(d.count.load(std::memory_order_relaxed));
    o->set_ns(d.ns.load(std::memory_order_relaxed));
  };
  auto* is = out->mutable_inference_stats();
  dur(s.success, is->mutable_success());
  dur(s.fail, is->mutable_fail());
  dur(s.queue, is->mutable_queue());
  dur(s.compute_input, is->mutable_compute_input());
  dur(s.compute_infer, is->mutable_compute_infer());
  dur(s.compute_output, is->mutable_compute_output());
  is->mutable_cache_hit();
  is->mutable_cache_miss();
  for (const auto& [size, b] : s.BatchStats()) {
    auto* bs = out->add_batch_stats();
    bs->set_batch_size(static_cast<uint64_t>(size));
    const uint64_t count = b.count;  // (clang 14 cannot capture structured bindings)
    auto set = [count](inference::StatisticDuration* d, uint64_t ns) {
      d->set_count(count);
      d->set_ns(ns);
    };
    set(bs->mutable_compute_input(), b.input_ns);
    set(bs->mutable_compute_infer(), b.infer_ns);
    set(bs->mutable_compute_output(), b.output_ns);
  }
}

// A unary inference: finishes when the runtime answers; a client cancellation marks the request
// so that it is not executed if still queued.
class InferReactor : public grpc::ServerUnaryReactor {
 public:
  explicit InferReactor(ServerState* state) : state_(state) {}
  void OnCancel() override { cancelled_->store(true); }
  void OnDone() override { delete this; }
  std::shared_ptr<std::atomic<bool>> cancelled() const { return cancelled_; }
  void Complete(const grpc::Status& status) {
    // After Finish the reactor may be deleted at any moment (OnDone on another thread).
    ServerState* state = state_;
    Finish(status);
    state->in_flight.fetch_sub(1);
  }

 private:
  ServerState* state_;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

uint64_t DeadlineTimeoutUs(grpc::CallbackServerContext* ctx) {
  auto deadline = ctx->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return 0;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                  deadline - std::chrono::system_clock::now())
                  .count();
  return left > 0 ? static_cast<uint64_t>(left) : 1;
}

}  // namespace

class GrpcFrontend::Service final : public GRPCInferenceService::CallbackService {
 public:
  Service(ModelManager* manager, ServerState* state) : manager_(manager), state_(state) {}

  void JoinBackground() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(background_);
    }
    for (auto& t : threads) t.join();
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* resp) override {
    resp->set_live(true);
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* resp) override {
    resp->set_ready(!state_->draining.load() && manager_->Ready());
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* resp) override {
    int64_t v;
    if (!ParseVersion(req->version(), &v))
      return Done(ctx, Bad("invalid version '" + req->version() + "'"));
    resp->set_ready(manager_->Find(req->name(), v).ok());
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* resp) override {
    resp->set_name(kServerName);
    resp->set_version(kServerVersion);
    for (const char* e : ServerExtensions()) resp->add_extensions(e);
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* resp) override {
    int64_t v;
    if (!ParseVersion(req->version(), &v))
      return Done(ctx, Bad("invalid version '" + req->version() + "'"));
    auto mv = manager_->Find(req->name(), v);
    if (!mv.ok()) return Done(ctx, ToGrpcStatus(mv.status()));
    const auto& config = (*mv)->config();
    const bool batching = config.max_batch_size() > 0;
    resp->set_name(req->name());
    if (v >= 0) {
      resp->add_versions(std::to_string(v));
    } else {
      for (int64_t rv : manager_->ReadyVersions(req->name()))
        resp->add_versions(std::to_string(rv));
    }
    resp->set_platform(config.platform().empty() ? config.backend() : config.platform());
    auto add = [batching](auto* t, const std::string& name, inference::DataType type,
                          const google::protobuf::RepeatedField<int64_t>& dims) {
      t->set_name(name);
      t->set_datatype(std::string(DataTypeName(ConfigDataType(type))));
      if (batching) t->add_shape(-1);
      for (int64_t d : dims) t->add_shape(d);
    };
    for (const auto& in : config.input())
      add(resp->add_inputs(), in.name(), in.data_type(), in.dims());
    for (const auto& out : config.output()) {
      add(resp->add_outputs(), out.name(), out.data_type(), out.dims());
    }
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx,
                                        const inference::ModelConfigRequest* req,
                                        inference::ModelConfigResponse* resp) override {
    int64_t v;
    if (!ParseVersion(req->version(), &v))
      return Done(ctx, Bad("invalid version '" + req->version() + "'"));
    auto mv = manager_->Find(req->name(), v);
    if (!mv.ok()) return Done(ctx, ToGrpcStatus(mv.status()));
    *resp->mutable_config() = (*mv)->config();
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* req,
                                            inference::ModelStatisticsResponse* resp) override {
    int64_t v;
    if (!ParseVersion(req->version(), &v))
      return Done(ctx, Bad("invalid version '" + req->version() + "'"));
    std::vector<std::string> names;
    if (req->name().empty()) {
      for (const IndexEntry& e : manager_->Index(true)) {
        if (names.empty() || names.back() != e.name) names.push_back(e.name);
      }
    } else {
      names.push_back(req->name());
    }
    for (const std::string& name : names) {
      std::vector<int64_t> versions;
      if (v >= 0) {
        versions.push_back(v);
      } else {
        versions = manager_->ReadyVersions(name);
      }
      if (!req->name().empty() && versions.empty()) {
        return Done(ctx, ToGrpcStatus(manager_->Find(name, -1).status()));
      }
      for (int64_t ver : versions) {
        auto mv = manager_->Find(name, ver);
        if (!mv.ok()) {
          if (!req->name().empty()) return Done(ctx, ToGrpcStatus(mv.status()));
          continue;
        }
        FillStats(name, **mv, resp->add_model_stats());
      }
    }
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* req,
                                            inference::RepositoryIndexResponse* resp) override {
    for (const IndexEntry& e : manager_->Index(req->ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return Done(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const inference::RepositoryModelLoadRequest* req,
                                                inference::RepositoryModelLoadResponse*) override {
    if (req->parameters_size() > 0) {
      return Done(ctx, Bad("load parameters (config / file overrides) are not supported by dais"));
    }
    return Repository(ctx, req->model_name(), true);
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* req,
      inference::RepositoryModelUnloadResponse*) override {
    return Repository(ctx, req->model_name(), false);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* req,
                                       inference::ModelInferResponse* resp) override {
    auto* reactor = new InferReactor(state_);
    state_->in_flight.fetch_add(1);
    if (state_->draining.load()) {
      reactor->Complete(
          grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "server is shutting down; not accepting new inference requests"));
      return reactor;
    }
    auto request = std::make_unique<InferenceRequest>();
    request->arrival_ns = NowNs();
    if (Status s = FromInferRequest(*req, request.get()); !s.ok()) {
      reactor->Complete(ToGrpcStatus(s));
      return reactor;
    }
    if (uint64_t t = DeadlineTimeoutUs(ctx);
        t > 0 && (request->timeout_us == 0 || t < request->timeout_us)) {
      request->timeout_us = t;
    }
    request->cancelled = reactor->cancelled();
    // `req` (borrowed by raw inputs) and `resp` stay valid until Finish.
    request->on_complete = [reactor, resp](StatusOr<ResponsePtr> result) {
      if (!result.ok()) return reactor->Complete(ToGrpcStatus(result.status()));
      ToInferResponse(**result, resp);
      reactor->Complete(grpc::Status::OK);
    };
    manager_->Infer(std::move(request));
    return reactor;
  }

  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(grpc::CallbackServerContext* ctx) override;

  // Extensions dais does not implement.
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest*,
      inference::SystemSharedMemoryStatusResponse*) override {
    return Unimplemented(ctx, "system shared memory");
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest*,
      inference::SystemSharedMemoryRegisterResponse*) override {
    return Unimplemented(ctx, "system shared memory");
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest*,
      inference::SystemSharedMemoryUnregisterResponse*) override {
    return Unimplemented(ctx, "system shared memory");
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest*,
      inference::CudaSharedMemoryStatusResponse*) override {
    return Unimplemented(ctx, "CUDA shared memory");
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest*,
      inference::CudaSharedMemoryRegisterResponse*) override {
    return Unimplemented(ctx, "CUDA shared memory");
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(
      grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest*,
      inference::CudaSharedMemoryUnregisterResponse*) override {
    return Unimplemented(ctx, "CUDA shared memory");
  }
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx,
                                         const inference::TraceSettingRequest*,
                                         inference::TraceSettingResponse*) override {
    return Unimplemented(ctx, "trace settings");
  }
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx,
                                        const inference::LogSettingsRequest*,
                                        inference::LogSettingsResponse*) override {
    return Unimplemented(ctx, "log settings");
  }

  ModelManager* manager() { return manager_; }
  ServerState* state() { return state_; }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                        const grpc::Status& status) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
  static grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* ctx,
                                                 const std::string& what) {
    return Done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                  "the " + what + " extension is not implemented by dais"));
  }

  grpc::ServerUnaryReactor* Repository(grpc::CallbackServerContext* ctx, const std::string& model,
                                       bool load) {
    if (manager_->mode() != ModelControlMode::kExplicit) {
      return Done(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                    "explicit model load / unload is not allowed unless "
                                    "--model-control-mode=explicit"));
    }
    if (state_->draining.load()) {
      return Done(ctx, grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    }
    auto* reactor = ctx->DefaultReactor();
    state_->in_flight.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    // Loading can take seconds: not on a gRPC thread.
    background_.emplace_back([this, reactor, model, load] {
      Status s = load ? manager_->LoadModel(model) : manager_->UnloadModel(model);
      reactor->Finish(s.ok() ? grpc::Status::OK
                             : ToGrpcStatus(s.WithPrefix(
                                   std::string(load ? "failed to load '" : "failed to unload '") +
                                   model + "'")));
      state_->in_flight.fetch_sub(1);
    });
    return reactor;
  }

  ModelManager* manager_;
  ServerState* state_;
  std::mutex mu_;
  std::vector<std::thread> background_;
};

namespace {

// Bidirectional stream: every request read is submitted at once; responses are written in
// completion order, one write at a time; errors go in error_message and the stream goes on.
class StreamReactor : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                                     inference::ModelStreamInferResponse> {
 public:
  StreamReactor(ModelManager* manager, ServerState* state) : manager_(manager), state_(state) {
    ReadNext();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::lock_guard<std::mutex> lock(mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    std::shared_ptr<inference::ModelInferRequest> msg = std::move(reading_);
    {
      // Counted before the next read: the client's half-close must not finish the stream
      // while this request is still unanswered.
      std::lock_guard<std::mutex> lock(mu_);
      ++pending_;
    }
    ReadNext();
    Submit(std::move(msg));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    writes_.pop_front();
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  void ReadNext() {
    reading_ = std::make_shared<inference::ModelInferRequest>();
    StartRead(reading_.get());
  }

  // `pending_` already counts this request.
  void Submit(std::shared_ptr<inference::ModelInferRequest> msg) {
    state_->in_flight.fetch_add(1);
    auto request = std::make_unique<InferenceRequest>();
    request->arrival_ns = NowNs();
    Status s = state_->draining.load()
                   ? Unavailable("server is shutting down; not accepting new inference requests")
                   : FromInferRequest(*msg, request.get());
    std::string id = msg->id();
    if (!s.ok()) return Answer(s, nullptr, id);
    // The message owns the raw input bytes the request borrows: keep it until the answer.
    request->on_complete = [this, msg, id](StatusOr<ResponsePtr> result) {
      if (!result.ok()) return Answer(result.status(), nullptr, id);
      Answer(OkStatus(), result->get(), id);
    };
    manager_->Infer(std::move(request));
  }

  void Answer(const Status& s, const InferenceResponse* response, const std::string& id) {
    inference::ModelStreamInferResponse out;
    if (s.ok()) {
      ToInferResponse(*response, out.mutable_infer_response());
    } else {
      out.set_error_message(s.message());
      out.mutable_infer_response()->set_id(id);
    }
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    state_->in_flight.fetch_sub(1);
    if (!broken_) writes_.push_back(std::move(out));
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void WriteNextLocked() {
    if (writing_ || writes_.empty() || broken_) return;
    writing_ = true;
    StartWrite(&writes_.front());
  }

  void MaybeFinishLocked() {
    if (finished_ || !reads_done_ || pending_ > 0 || writing_ || (!writes_.empty() && !broken_)) {
      return;
    }
    finished_ = true;
    Finish(grpc::Status::OK);
  }

  ModelManager* manager_;
  ServerState* state_;
  std::shared_ptr<inference::ModelInferRequest> reading_;
  std::mutex mu_;
  std::deque<inference::ModelStreamInferResponse> writes_;  // front is being written
  int pending_ = 0;
  bool writing_ = false;
  bool reads_done_ = false;
  bool broken_ = false;
  bool finished_ = false;
};

}  // namespace

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcFrontend::Service::ModelStreamInfer(grpc::CallbackServerContext*) {
  return new StreamReactor(manager_, state_);
}

GrpcFrontend::GrpcFrontend(GrpcOptions options, ModelManager* manager, ServerState* state)
    : options_(std::move(options)),
      manager_(manager),
      state_(state),
      service_(std::make_unique<Service>(manager, state)) {}

GrpcFrontend::~GrpcFrontend() { Stop(0); }

Status GrpcFrontend::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.address + ":" + std::to_string(options_.port),
                           grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             options_.keepalive_permit_without_calls ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA,
                             options_.http2_max_pings_without_data);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    return Unavailable("cannot listen for gRPC on " + options_.address + ":" +
                       std::to_string(options_.port));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);
  return OkStatus();
}

void GrpcFrontend::SetNotServing() {
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
}

void GrpcFrontend::Stop(int deadline_ms) {
  if (!server_) return;
  service_->JoinBackground();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  server_->Wait();
  server_.reset();
}

}  // namespace dais::grpcfe
