#include "frontends/grpc/kserve_grpc.h"

#include <charconv>
#include <deque>

#include "common/logging.h"
#include "dais/clock.h"
#include "frontends/background.h"
#include "frontends/grpc/grpc_codec.h"
#include "grpc_service.pb.h"
#include "health.pb.h"
#include "runtime/tensor_config.h"

namespace dais::grpcfe {
namespace {

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

}  // namespace

class GrpcFrontend::Service final {
 public:
  Service(ModelManager* manager, ServerState* state) : manager_(manager), state_(state) {}

  MethodTable Methods();
  void SetNotServing();

  void JoinBackground() { background_.JoinAll(); }

 private:
  grpc::Status ServerLive(const inference::ServerLiveRequest&,
                          inference::ServerLiveResponse* resp) {
    resp->set_live(true);
    return (grpc::Status::OK);
  }

  grpc::Status ServerReady(const inference::ServerReadyRequest&,
                           inference::ServerReadyResponse* resp) {
    resp->set_ready(!state_->draining.load() && manager_->Ready());
    return (grpc::Status::OK);
  }

  grpc::Status ModelReady(const inference::ModelReadyRequest& req,
                          inference::ModelReadyResponse* resp) {
    int64_t v;
    if (!ParseVersion(req.version(), &v)) return (Bad("invalid version '" + req.version() + "'"));
    resp->set_ready(manager_->Find(req.name(), v).ok());
    return (grpc::Status::OK);
  }

  grpc::Status ServerMetadata(const inference::ServerMetadataRequest&,
                              inference::ServerMetadataResponse* resp) {
    resp->set_name(kServerName);
    resp->set_version(kServerVersion);
    for (const char* e : ServerExtensions()) resp->add_extensions(e);
    return (grpc::Status::OK);
  }

  grpc::Status ModelMetadata(const inference::ModelMetadataRequest& req,
                             inference::ModelMetadataResponse* resp) {
    int64_t v;
    if (!ParseVersion(req.version(), &v)) return (Bad("invalid version '" + req.version() + "'"));
    auto mv = manager_->Find(req.name(), v);
    if (!mv.ok()) return (ToGrpcStatus(mv.status()));
    const auto& config = (*mv)->config();
    const bool batching = config.max_batch_size() > 0;
    resp->set_name(req.name());
    if (v >= 0) {
      resp->add_versions(std::to_string(v));
    } else {
      for (int64_t rv : manager_->ReadyVersions(req.name())) resp->add_versions(std::to_string(rv));
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
    return (grpc::Status::OK);
  }

  grpc::Status ModelConfig(const inference::ModelConfigRequest& req,
                           inference::ModelConfigResponse* resp) {
    int64_t v;
    if (!ParseVersion(req.version(), &v)) return (Bad("invalid version '" + req.version() + "'"));
    auto mv = manager_->Find(req.name(), v);
    if (!mv.ok()) return (ToGrpcStatus(mv.status()));
    *resp->mutable_config() = (*mv)->config();
    return (grpc::Status::OK);
  }

  grpc::Status ModelStatistics(const inference::ModelStatisticsRequest& req,
                               inference::ModelStatisticsResponse* resp) {
    int64_t v;
    if (!ParseVersion(req.version(), &v)) return (Bad("invalid version '" + req.version() + "'"));
    std::vector<std::string> names;
    if (req.name().empty()) {
      for (const IndexEntry& e : manager_->Index(true)) {
        if (names.empty() || names.back() != e.name) names.push_back(e.name);
      }
    } else {
      names.push_back(req.name());
    }
    for (const std::string& name : names) {
      std::vector<int64_t> versions;
      if (v >= 0) {
        versions.push_back(v);
      } else {
        versions = manager_->ReadyVersions(name);
      }
      if (!req.name().empty() && versions.empty()) {
        return (ToGrpcStatus(manager_->Find(name, -1).status()));
      }
      for (int64_t ver : versions) {
        auto mv = manager_->Find(name, ver);
        if (!mv.ok()) {
          if (!req.name().empty()) return (ToGrpcStatus(mv.status()));
          continue;
        }
        FillStats(name, **mv, resp->add_model_stats());
      }
    }
    return (grpc::Status::OK);
  }

  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& req,
                               inference::RepositoryIndexResponse* resp) {
    for (const IndexEntry& e : manager_->Index(req.ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(std::string(ModelStateName(e.state)));
      m->set_reason(e.reason);
    }
    return (grpc::Status::OK);
  }

  void Infer(std::shared_ptr<ServerCall> call, std::string bytes);
  void Repository(std::shared_ptr<ServerCall> call, std::string bytes, bool load);
  void HealthCheck(std::shared_ptr<ServerCall> call, std::string bytes, bool watch);

  ModelManager* manager_;
  ServerState* state_;
  std::mutex mu_;
  frontends::BackgroundTasks background_;            // repository load/unload requests
  bool serving_ = true;                              // guarded by mu_
  std::vector<std::weak_ptr<ServerCall>> watchers_;  // Health/Watch calls; guarded by mu_
};

namespace {

const std::string kService = "/inference.GRPCInferenceService/";

template <typename Req>
bool Parse(const std::string& bytes, Req* req, ServerCall* call) {
  if (req->ParseFromString(bytes)) return true;
  call->Finish(Bad("the request is not a valid " + req->GetTypeName() + " message"));
  return false;
}

// A method answered at once from its request.
template <typename Req, typename Resp>
Method Sync(std::function<grpc::Status(const Req&, Resp*)> fn) {
  Method m;
  m.unary = [fn = std::move(fn)](std::shared_ptr<ServerCall> call, std::string bytes) {
    Req req;
    if (!Parse(bytes, &req, call.get())) return;
    Resp resp;
    grpc::Status s = fn(req, &resp);
    if (!s.ok()) return call->Finish(std::move(s));
    call->Reply(resp.SerializeAsString());
  };
  return m;
}

Method NotImplemented(const std::string& what) {
  Method m;
  m.unary = [what](std::shared_ptr<ServerCall> call, std::string) {
    call->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                              "the " + what + " extension is not implemented by dais"));
  };
  return m;
}

// ModelStreamInfer: every request read is submitted at once; responses are written in
// completion order; errors go in error_message and the stream goes on. The stream ends (OK)
// once the client has half-closed and every request is answered.
class InferStream : public StreamHandler, public std::enable_shared_from_this<InferStream> {
 public:
  InferStream(std::shared_ptr<ServerCall> call, ModelManager* manager, ServerState* state)
      : call_(std::move(call)), manager_(manager), state_(state) {}

  void OnMessage(std::string bytes) override {
    auto msg = std::make_shared<inference::ModelInferRequest>();
    state_->in_flight.fetch_add(1);
    pending_.fetch_add(1);
    Status s =
        state_->draining.load()
            ? Unavailable("server is shutting down; not accepting new inference requests")
            : (msg->ParseFromString(bytes) ? OkStatus()
                                           : InvalidArgument("a stream message is not a valid "
                                                             "inference.ModelInferRequest"));
    auto request = std::make_unique<InferenceRequest>();
    request->arrival_ns = NowNs();
    if (s.ok()) s = FromInferRequest(*msg, request.get());
    if (!s.ok()) return Answer(s, nullptr, msg->id());
    if (uint64_t t = call_->timeout_us();
        t > 0 && (request->timeout_us == 0 || t < request->timeout_us)) {
      request->timeout_us = t;
    }
    request->cancelled = call_->cancelled();
    // The message owns the raw input bytes the request borrows: keep it until the answer.
    request->on_complete = [self = shared_from_this(), msg](StatusOr<ResponsePtr> result) {
      if (!result.ok()) return self->Answer(result.status(), nullptr, msg->id());
      self->Answer(OkStatus(), result->get(), msg->id());
    };
    manager_->Infer(std::move(request));
  }

  void OnHalfClose() override {
    half_closed_.store(true);
    MaybeFinish();
  }

 private:
  void Answer(const Status& s, const InferenceResponse* response, const std::string& id) {
    inference::ModelStreamInferResponse out;
    if (s.ok()) {
      ToInferResponse(*response, out.mutable_infer_response());
    } else {
      out.set_error_message(s.message());
      out.mutable_infer_response()->set_id(id);
    }
    call_->Write(out.SerializeAsString());
    pending_.fetch_sub(1);
    state_->in_flight.fetch_sub(1);
    MaybeFinish();
  }

  // Writes and Finish are carried out in the order they are called, so the trailers follow
  // every answer written before.
  void MaybeFinish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || !half_closed_.load() || pending_.load() > 0) return;
    finished_ = true;
    call_->Finish(grpc::Status::OK);
  }

  std::shared_ptr<ServerCall> call_;
  ModelManager* manager_;
  ServerState* state_;
  std::atomic<int> pending_{0};
  std::atomic<bool> half_closed_{false};
  std::mutex mu_;
  bool finished_ = false;  // guarded by mu_
};

}  // namespace

void GrpcFrontend::Service::Infer(std::shared_ptr<ServerCall> call, std::string bytes) {
  state_->in_flight.fetch_add(1);
  auto fail = [this, &call](grpc::Status s) {
    call->Finish(std::move(s));
    state_->in_flight.fetch_sub(1);
  };
  if (state_->draining.load()) {
    return fail(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "server is shutting down; not accepting new inference requests"));
  }
  auto msg = std::make_shared<inference::ModelInferRequest>();
  if (!msg->ParseFromString(bytes)) {
    return fail(Bad("the request is not a valid inference.ModelInferRequest message"));
  }
  auto request = std::make_unique<InferenceRequest>();
  request->arrival_ns = NowNs();
  if (Status s = FromInferRequest(*msg, request.get()); !s.ok()) return fail(ToGrpcStatus(s));
  if (uint64_t t = call->timeout_us();
      t > 0 && (request->timeout_us == 0 || t < request->timeout_us)) {
    request->timeout_us = t;
  }
  request->cancelled = call->cancelled();
  // `msg` owns the raw input bytes the request borrows.
  request->on_complete = [call, msg, state = state_](StatusOr<ResponsePtr> result) {
    if (!result.ok()) {
      call->Finish(ToGrpcStatus(result.status()));
    } else {
      std::shared_ptr<InferenceResponse> response = std::move(*result);
      call->ReplyEncoded([response] {
        inference::ModelInferResponse out;
        ToInferResponse(*response, &out);
        return out.SerializeAsString();
      });
    }
    state->in_flight.fetch_sub(1);
  };
  manager_->Infer(std::move(request));
}

void GrpcFrontend::Service::Repository(std::shared_ptr<ServerCall> call, std::string bytes,
                                       bool load) {
  std::string model;
  if (load) {
    inference::RepositoryModelLoadRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    if (req.parameters_size() > 0) {
      return call->Finish(
          Bad("load parameters (config / file overrides) are not supported by dais"));
    }
    model = req.model_name();
  } else {
    inference::RepositoryModelUnloadRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    model = req.model_name();
  }
  if (manager_->mode() != ModelControlMode::kExplicit) {
    return call->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                     "explicit model load / unload is not allowed unless "
                                     "--model-control-mode=explicit"));
  }
  if (state_->draining.load()) {
    return call->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
  }
  state_->in_flight.fetch_add(1);
  // Loading can take seconds: not on an I/O thread.
  background_.Run([this, call, model, load] {
    Status s = load ? manager_->LoadModel(model) : manager_->UnloadModel(model);
    if (s.ok()) {
      call->Reply(load ? inference::RepositoryModelLoadResponse().SerializeAsString()
                       : inference::RepositoryModelUnloadResponse().SerializeAsString());
    } else {
      call->Finish(ToGrpcStatus(s.WithPrefix(
          std::string(load ? "failed to load '" : "failed to unload '") + model + "'")));
    }
    state_->in_flight.fetch_sub(1);
  });
}

// grpc.health.v1: the server ("") is SERVING until SIGTERM; a named service is known when it is
// the inference service. Watch sends the status now and again when it changes.
void GrpcFrontend::Service::HealthCheck(std::shared_ptr<ServerCall> call, std::string bytes,
                                        bool watch) {
  using grpc::health::v1::HealthCheckResponse;
  grpc::health::v1::HealthCheckRequest req;
  if (!Parse(bytes, &req, call.get())) return;
  const bool known = req.service().empty() || req.service() == "inference.GRPCInferenceService";
  HealthCheckResponse resp;
  std::lock_guard<std::mutex> lock(mu_);
  if (!known) {
    if (!watch) return call->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
    resp.set_status(HealthCheckResponse::SERVICE_UNKNOWN);
  } else {
    resp.set_status(serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  }
  if (!watch) return call->Reply(resp.SerializeAsString());
  call->Write(resp.SerializeAsString());
  if (!known) return;
  std::erase_if(watchers_, [](const std::weak_ptr<ServerCall>& w) { return w.expired(); });
  watchers_.push_back(call);
}

void GrpcFrontend::Service::SetNotServing() {
  grpc::health::v1::HealthCheckResponse resp;
  resp.set_status(grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  std::lock_guard<std::mutex> lock(mu_);
  serving_ = false;
  for (auto& w : watchers_) {
    if (auto call = w.lock()) call->Write(resp.SerializeAsString());
  }
  watchers_.clear();
}

MethodTable GrpcFrontend::Service::Methods() {
  using namespace inference;  // NOLINT: the message names below are the protocol's
  MethodTable t;
  auto sync = [&](const std::string& name, auto fn) {
    t[kService + name] = Sync(std::function(fn));
  };
  sync("ServerLive",
       [this](const ServerLiveRequest& q, ServerLiveResponse* r) { return ServerLive(q, r); });
  sync("ServerReady",
       [this](const ServerReadyRequest& q, ServerReadyResponse* r) { return ServerReady(q, r); });
  sync("ModelReady",
       [this](const ModelReadyRequest& q, ModelReadyResponse* r) { return ModelReady(q, r); });
  sync("ServerMetadata", [this](const ServerMetadataRequest& q, ServerMetadataResponse* r) {
    return ServerMetadata(q, r);
  });
  sync("ModelMetadata", [this](const ModelMetadataRequest& q, ModelMetadataResponse* r) {
    return ModelMetadata(q, r);
  });
  sync("ModelConfig",
       [this](const ModelConfigRequest& q, ModelConfigResponse* r) { return ModelConfig(q, r); });
  sync("ModelStatistics", [this](const ModelStatisticsRequest& q, ModelStatisticsResponse* r) {
    return ModelStatistics(q, r);
  });
  sync("RepositoryIndex", [this](const RepositoryIndexRequest& q, RepositoryIndexResponse* r) {
    return RepositoryIndex(q, r);
  });
  t[kService + "RepositoryModelLoad"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    Repository(std::move(c), std::move(b), true);
  };
  t[kService + "RepositoryModelUnload"].unary = [this](std::shared_ptr<ServerCall> c,
                                                       std::string b) {
    Repository(std::move(c), std::move(b), false);
  };
  t[kService + "ModelInfer"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    Infer(std::move(c), std::move(b));
  };
  t[kService + "ModelStreamInfer"].stream = [this](std::shared_ptr<ServerCall> c) {
    return std::make_shared<InferStream>(std::move(c), manager_, state_);
  };
  for (const char* m :
       {"SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister"}) {
    t[kService + m] = NotImplemented("system shared memory");
  }
  for (const char* m :
       {"CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister"}) {
    t[kService + m] = NotImplemented("CUDA shared memory");
  }
  t[kService + "TraceSetting"] = NotImplemented("trace settings");
  t[kService + "LogSettings"] = NotImplemented("log settings");
  t["/grpc.health.v1.Health/Check"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    HealthCheck(std::move(c), std::move(b), false);
  };
  t["/grpc.health.v1.Health/Watch"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    HealthCheck(std::move(c), std::move(b), true);
  };
  return t;
}

GrpcFrontend::GrpcFrontend(GrpcOptions options, ModelManager* manager, ServerState* state)
    : options_(std::move(options)),
      manager_(manager),
      state_(state),
      service_(std::make_unique<Service>(manager, state)) {}

GrpcFrontend::~GrpcFrontend() { Stop(0); }

Status GrpcFrontend::Start() {
  H2ServerOptions o;
  o.address = options_.address;
  o.port = options_.port;
  o.threads = options_.threads;
  o.h2.max_receive_message_bytes = static_cast<uint32_t>(options_.max_message_bytes);
  o.h2.max_send_message_bytes = static_cast<uint32_t>(options_.max_message_bytes);
  o.h2.max_buffered_bytes = 2 * static_cast<uint64_t>(options_.max_message_bytes);
  o.keepalive_time_ms = options_.keepalive_time_ms;
  o.keepalive_timeout_ms = options_.keepalive_timeout_ms;
  o.keepalive_permit_without_calls = options_.keepalive_permit_without_calls;
  o.max_pings_without_data = options_.http2_max_pings_without_data;
  o.max_connections = options_.max_connections;
  server_ = std::make_unique<H2Server>(std::move(o), service_->Methods());
  Status s = server_->Start();
  if (!s.ok()) {
    server_.reset();
    return s;
  }
  port_ = server_->port();
  return OkStatus();
}

void GrpcFrontend::SetNotServing() { service_->SetNotServing(); }

void GrpcFrontend::Stop(int deadline_ms) {
  if (!server_) return;
  service_->JoinBackground();
  server_->Stop(deadline_ms);
  server_.reset();
}

}  // namespace dais::grpcfe
