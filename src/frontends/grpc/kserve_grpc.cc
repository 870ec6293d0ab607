#include "frontends/grpc/kserve_grpc.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/logging.h"
#include "common/mutex.h"
#include "dais/clock.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/memory_grpc.h"
#include "grpc_service.pb.h"
#include "health.pb.h"
#include "labels.pb.h"
#include "server/trace_headers.h"

namespace dais::frontends::grpc {
namespace {

// Parses an optional version string ("" -> -1).
StatusOr<int64_t> ParseVersion(const std::string& s) {
  int64_t v = -1;
  if (s.empty()) return v;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) {
    return InvalidArgument("invalid version '" + s + "'");
  }
  return v;
}

#define ASSIGN_OR_RETURN_GRPC_IMPL(tmp, lhs, expr)  \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return ToGrpcStatus(tmp.status()); \
  lhs = std::move(tmp).value()
// ASSIGN_OR_RETURN for a method that returns a ::grpc::Status.
#define ASSIGN_OR_RETURN_GRPC(lhs, expr) \
  ASSIGN_OR_RETURN_GRPC_IMPL(DAIS_CONCAT(dais_statusor_, __LINE__), lhs, expr)

void FillStats(const std::string& name, const runtime::ModelVersion& mv,
               inference::ModelStatistics* out) {
  const runtime::ModelStats& s = mv.stats();
  out->set_name(name);
  out->set_version(std::to_string(mv.version()));
  out->set_last_inference(s.last_inference_ms.load());
  out->set_inference_count(s.inference_count.load());
  out->set_execution_count(s.execution_count.load());
  auto dur = [](const runtime::DurationStat& d, inference::StatisticDuration* o) {
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

const std::string kService = "/inference.GRPCInferenceService/";

template <typename Req>
bool Parse(const std::string& bytes, Req* req, ServerCall* call) {
  if (req->ParseFromString(bytes)) return true;
  call->Finish(ToGrpcStatus(
      InvalidArgument("the request is not a valid " + req->GetTypeName() + " message")));
  return false;
}

// A method answered at once from its request.
template <typename Req, typename Resp>
Method Sync(std::function<::grpc::Status(const Req&, Resp*)> fn) {
  Method m;
  m.unary = [fn = std::move(fn)](std::shared_ptr<ServerCall> call, std::string bytes) {
    Req req;
    if (!Parse(bytes, &req, call.get())) return;
    Resp resp;
    ::grpc::Status s = fn(req, &resp);
    if (!s.ok()) return call->Finish(std::move(s));
    call->Reply(resp.SerializeAsString());
  };
  return m;
}

}  // namespace

class GrpcFrontend::Service final {
 public:
  Service(server::InferenceServer* server, server::ApiRestrictions restrictions,
          server::LabelSink* labels, memory::MemoryService* memory)
      : server_(server), restrictions_(std::move(restrictions)), labels_(labels), memory_(memory) {}

  MethodTable Methods();
  void SetNotServing();

 private:
  // Registers `fn` as the unary method `name` of the inference service.
  template <typename Req, typename Resp>
  void AddSync(MethodTable& t, const std::string& name,
               ::grpc::Status (Service::*fn)(const Req&, Resp*)) {
    t[kService + name] =
        Sync<Req, Resp>([this, fn](const Req& q, Resp* r) { return (this->*fn)(q, r); });
  }

  ::grpc::Status ServerLive(const inference::ServerLiveRequest&,
                            inference::ServerLiveResponse* resp) {
    resp->set_live(true);
    return ::grpc::Status::OK;
  }

  ::grpc::Status ServerReady(const inference::ServerReadyRequest&,
                             inference::ServerReadyResponse* resp) {
    resp->set_ready(server_->Ready().ok());
    return ::grpc::Status::OK;
  }

  ::grpc::Status ModelReady(const inference::ModelReadyRequest& req,
                            inference::ModelReadyResponse* resp) {
    ASSIGN_OR_RETURN_GRPC(int64_t v, ParseVersion(req.version()));
    resp->set_ready(server_->ModelReady(req.name(), v).ok());
    return ::grpc::Status::OK;
  }

  ::grpc::Status ServerMetadata(const inference::ServerMetadataRequest&,
                                inference::ServerMetadataResponse* resp) {
    resp->set_name(server::kServerName);
    resp->set_version(server::kServerVersion);
    for (const char* e : server::ServerExtensions()) resp->add_extensions(e);
    return ::grpc::Status::OK;
  }

  ::grpc::Status ModelMetadata(const inference::ModelMetadataRequest& req,
                               inference::ModelMetadataResponse* resp) {
    ASSIGN_OR_RETURN_GRPC(int64_t v, ParseVersion(req.version()));
    ASSIGN_OR_RETURN_GRPC(server::ModelMetadata m, server_->Metadata(req.name(), v));
    resp->set_name(m.name);
    for (const std::string& version : m.versions) resp->add_versions(version);
    resp->set_platform(m.platform);
    auto add = [](auto* t, const server::TensorMetadata& meta) {
      t->set_name(meta.name);
      t->set_datatype(meta.datatype);
      for (int64_t d : meta.shape) t->add_shape(d);
    };
    for (const auto& in : m.inputs) add(resp->add_inputs(), in);
    for (const auto& out : m.outputs) add(resp->add_outputs(), out);
    return ::grpc::Status::OK;
  }

  ::grpc::Status ModelConfig(const inference::ModelConfigRequest& req,
                             inference::ModelConfigResponse* resp) {
    ASSIGN_OR_RETURN_GRPC(int64_t v, ParseVersion(req.version()));
    ASSIGN_OR_RETURN_GRPC(std::shared_ptr<runtime::ModelVersion> mv, server_->Find(req.name(), v));
    *resp->mutable_config() = mv->config();
    return ::grpc::Status::OK;
  }

  ::grpc::Status ModelStatistics(const inference::ModelStatisticsRequest& req,
                                 inference::ModelStatisticsResponse* resp) {
    ASSIGN_OR_RETURN_GRPC(int64_t v, ParseVersion(req.version()));
    ASSIGN_OR_RETURN_GRPC(std::vector<server::VersionStatistics> stats,
                          server_->Statistics(req.name(), v));
    for (const server::VersionStatistics& s : stats) {
      FillStats(s.name, *s.version, resp->add_model_stats());
    }
    return ::grpc::Status::OK;
  }

  ::grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& req,
                                 inference::RepositoryIndexResponse* resp) {
    for (const runtime::IndexEntry& e : server_->Index(req.ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(std::string(runtime::ModelStateName(e.state)));
      m->set_reason(e.reason);
    }
    return ::grpc::Status::OK;
  }

  void Infer(std::shared_ptr<ServerCall> call, std::string bytes);
  void Repository(std::shared_ptr<ServerCall> call, std::string bytes,
                  server::RepositoryAction action);
  void HealthCheck(std::shared_ptr<ServerCall> call, std::string bytes, bool watch);
  void PostLabels(std::shared_ptr<ServerCall> call, std::string bytes);
  // Puts each method of `t` behind its API group's restriction, if any.
  void Restrict(MethodTable& t) const;

  server::InferenceServer* server_;
  const server::ApiRestrictions restrictions_;
  server::LabelSink* const labels_;
  memory::MemoryService* const memory_;
  Mutex mu_;
  bool serving_ DAIS_GUARDED_BY(mu_) = true;
  std::vector<std::weak_ptr<ServerCall>> watchers_ DAIS_GUARDED_BY(mu_);  // Health/Watch calls
};

namespace {

Method NotImplemented(const std::string& what) {
  Method m;
  m.unary = [what](std::shared_ptr<ServerCall> call, std::string) {
    call->Finish(::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                "the " + what + " extension is not implemented by dais"));
  };
  return m;
}

// A ModelInferRequest as a request for the server. The message owns the raw input
// bytes the request borrows: the caller keeps `msg` until the answer. The call's deadline and
// cancellation apply to the request.
StatusOr<runtime::RequestPtr> DecodeInfer(const inference::ModelInferRequest& msg,
                                          const ServerCall& call) {
  auto request = std::make_unique<runtime::InferenceRequest>();
  request->arrival_ns = NowNs();
  RETURN_IF_ERROR(FromInferRequest(msg, request.get()));
  server::ApplyTraceHeaders(
      [&call](std::string_view n) { return call.Metadata(n).value_or(std::string_view()); },
      request.get());
  if (uint64_t t = call.timeout_us();
      t > 0 && (request->timeout_us == 0 || t < request->timeout_us)) {
    request->timeout_us = t;
  }
  request->cancelled = call.cancelled();
  return request;
}

// ModelStreamInfer: every request read is submitted at once; responses are written in
// completion order; errors go in error_message and the stream goes on. The stream ends (OK)
// once the client has half-closed and every request is answered.
class InferStream : public StreamHandler, public std::enable_shared_from_this<InferStream> {
 public:
  InferStream(std::shared_ptr<ServerCall> call, server::InferenceServer* server)
      : call_(std::move(call)), server_(server) {}

  void OnMessage(std::string bytes) override {
    pending_.fetch_add(1);
    auto msg = std::make_shared<inference::ModelInferRequest>();
    const Status accepting = server_->AcceptingInference();
    StatusOr<runtime::RequestPtr> request =
        !accepting.ok() ? StatusOr<runtime::RequestPtr>(accepting)
        : msg->ParseFromString(bytes)
            ? DecodeInfer(*msg, *call_)
            : StatusOr<runtime::RequestPtr>(InvalidArgument("a stream message is not a valid "
                                                            "inference.ModelInferRequest"));
    if (!request.ok()) return Answer(request.status(), nullptr, msg->id());
    server_->Infer(
        std::move(*request),
        [self = shared_from_this(), msg](StatusOr<runtime::ResponsePtr> result, server::InFlight) {
          if (!result.ok()) return self->Answer(result.status(), nullptr, msg->id());
          self->Answer(OkStatus(), result->get(), msg->id());
        });
  }

  void OnHalfClose() override {
    half_closed_.store(true);
    MaybeFinish();
  }

 private:
  void Answer(const Status& s, const runtime::InferenceResponse* response, const std::string& id) {
    inference::ModelStreamInferResponse out;
    if (s.ok()) {
      ToInferResponse(*response, out.mutable_infer_response());
    } else {
      out.set_error_message(s.message());
      out.mutable_infer_response()->set_id(id);
    }
    call_->Write(out.SerializeAsString());
    pending_.fetch_sub(1);
    MaybeFinish();
  }

  // Writes and Finish are carried out in the order they are called, so the trailers follow
  // every answer written before.
  void MaybeFinish() DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (finished_ || !half_closed_.load() || pending_.load() > 0) return;
    finished_ = true;
    call_->Finish(::grpc::Status::OK);
  }

  std::shared_ptr<ServerCall> call_;
  server::InferenceServer* server_;
  std::atomic<int> pending_{0};
  std::atomic<bool> half_closed_{false};
  Mutex mu_;
  bool finished_ DAIS_GUARDED_BY(mu_) = false;
};

}  // namespace

void GrpcFrontend::Service::Infer(std::shared_ptr<ServerCall> call, std::string bytes) {
  if (Status s = server_->AcceptingInference(); !s.ok()) return call->Finish(ToGrpcStatus(s));
  auto msg = std::make_shared<inference::ModelInferRequest>();
  if (!msg->ParseFromString(bytes)) {
    return call->Finish(ToGrpcStatus(
        InvalidArgument("the request is not a valid inference.ModelInferRequest message")));
  }
  StatusOr<runtime::RequestPtr> request = DecodeInfer(*msg, *call);
  if (!request.ok()) return call->Finish(ToGrpcStatus(request.status()));
  // The connection's handler: an answer given here is queued and written when it returns.
  (*request)->may_run_inline = true;
  server_->Infer(std::move(*request),
                 [call, msg](StatusOr<runtime::ResponsePtr> result, server::InFlight in_flight) {
                   if (!result.ok()) return call->Finish(ToGrpcStatus(result.status()));
                   std::shared_ptr<runtime::InferenceResponse> response = std::move(*result);
                   call->ReplyEncoded([response] {
                     inference::ModelInferResponse out;
                     ToInferResponse(*response, &out);
                     return out.SerializeAsString();
                   });
                 });
}

void GrpcFrontend::Service::Repository(std::shared_ptr<ServerCall> call, std::string bytes,
                                       server::RepositoryAction action) {
  const bool load = action == server::RepositoryAction::kLoad;
  std::string model;
  bool has_parameters = false;
  if (load) {
    inference::RepositoryModelLoadRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    model = req.model_name();
    has_parameters = req.parameters_size() > 0;
  } else {
    inference::RepositoryModelUnloadRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    model = req.model_name();
  }
  Status s = server_->Repository(action, model, has_parameters, [call, load](Status result) {
    if (!result.ok()) return call->Finish(ToGrpcStatus(result));
    call->Reply(load ? inference::RepositoryModelLoadResponse().SerializeAsString()
                     : inference::RepositoryModelUnloadResponse().SerializeAsString());
  });
  if (!s.ok()) call->Finish(ToGrpcStatus(s));
}

// The gRPC form of POST /labels: the same rules (server::CheckLabel), the same sink.
void GrpcFrontend::Service::PostLabels(std::shared_ptr<ServerCall> call, std::string bytes) {
  if (labels_ == nullptr) {
    return call->Finish(::grpc::Status(
        ::grpc::StatusCode::NOT_FOUND,
        "this server has no label stream (give --label-stream redis://HOST:PORT/STREAM)"));
  }
  dais::labels::v1::PostLabelsRequest req;
  if (!Parse(bytes, &req, call.get())) return;
  if (req.labels_size() == 0 ||
      static_cast<size_t>(req.labels_size()) > server::kMaxLabelsPerRequest) {
    return call->Finish(::grpc::Status(
        ::grpc::StatusCode::INVALID_ARGUMENT,
        "labels: 1 to " + std::to_string(server::kMaxLabelsPerRequest) + " labels are needed"));
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<server::Label> labels;
  for (int i = 0; i < req.labels_size(); ++i) {
    const auto& in = req.labels(i);
    server::Label l{in.request_id(),
                    {in.entity_ids().begin(), in.entity_ids().end()},
                    in.time_ms(),
                    {},
                    in.source()};
    // A protobuf map has no order: by name, so that the stored JSON does not vary.
    l.values.assign(in.labels().begin(), in.labels().end());
    std::sort(l.values.begin(), l.values.end());
    if (Status s = server::CheckLabel("labels[" + std::to_string(i) + "]", now_ms, &l); !s.ok()) {
      return call->Finish(ToGrpcStatus(s));
    }
    labels.push_back(std::move(l));
  }
  auto admitted = server_->Admit();
  if (!admitted.ok()) return call->Finish(ToGrpcStatus(admitted.status()));
  const size_t n = labels.size();
  labels_->Write(std::move(labels), [call, n, in_flight = *admitted](Status s) {
    if (!s.ok()) return call->Finish(ToGrpcStatus(s));
    dais::labels::v1::PostLabelsResponse resp;
    resp.set_accepted(static_cast<uint32_t>(n));
    call->Reply(resp.SerializeAsString());
  });
}

// grpc.health.v1: the server ("") is SERVING until SIGTERM; a named service is known when it is
// the inference service. Watch sends the status now and again when it changes.
void GrpcFrontend::Service::HealthCheck(std::shared_ptr<ServerCall> call, std::string bytes,
                                        bool watch) {
  using ::grpc::health::v1::HealthCheckResponse;
  ::grpc::health::v1::HealthCheckRequest req;
  if (!Parse(bytes, &req, call.get())) return;
  const bool known = req.service().empty() || req.service() == "inference.GRPCInferenceService";
  HealthCheckResponse resp;
  MutexLock lock(&mu_);
  if (!known) {
    if (!watch)
      return call->Finish(::grpc::Status(::grpc::StatusCode::NOT_FOUND, "unknown service"));
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
  ::grpc::health::v1::HealthCheckResponse resp;
  resp.set_status(::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  MutexLock lock(&mu_);
  serving_ = false;
  for (auto& w : watchers_) {
    if (auto call = w.lock()) call->Write(resp.SerializeAsString());
  }
  watchers_.clear();
}

MethodTable GrpcFrontend::Service::Methods() {
  using namespace inference;  // NOLINT: the message names below are the protocol's
  MethodTable t;
  // The methods answered at once from their request, by name.
  AddSync(t, "ServerLive", &Service::ServerLive);
  AddSync(t, "ServerReady", &Service::ServerReady);
  AddSync(t, "ModelReady", &Service::ModelReady);
  AddSync(t, "ServerMetadata", &Service::ServerMetadata);
  AddSync(t, "ModelMetadata", &Service::ModelMetadata);
  AddSync(t, "ModelConfig", &Service::ModelConfig);
  AddSync(t, "ModelStatistics", &Service::ModelStatistics);
  AddSync(t, "RepositoryIndex", &Service::RepositoryIndex);
  t[kService + "RepositoryModelLoad"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    Repository(std::move(c), std::move(b), server::RepositoryAction::kLoad);
  };
  t[kService + "RepositoryModelUnload"].unary = [this](std::shared_ptr<ServerCall> c,
                                                       std::string b) {
    Repository(std::move(c), std::move(b), server::RepositoryAction::kUnload);
  };
  t[kService + "ModelInfer"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    Infer(std::move(c), std::move(b));
  };
  t[kService + "ModelStreamInfer"].stream = [this](std::shared_ptr<ServerCall> c) {
    return std::make_shared<InferStream>(std::move(c), server_);
  };
  for (const char* m :
       {"SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister"}) {
    t[kService + m] = NotImplemented("system shared memory");
  }
  for (const char* m :
       {"CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister"}) {
    t[kService + m] = NotImplemented("CUDA shared memory");
  }
  t["/dais.labels.v1.Labels/Post"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    PostLabels(std::move(c), std::move(b));
  };
  if (memory_ != nullptr) AddMemoryMethods(t, memory_);
  t[kService + "TraceSetting"] = NotImplemented("trace settings");
  t[kService + "LogSettings"] = NotImplemented("log settings");
  t["/grpc.health.v1.Health/Check"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    HealthCheck(std::move(c), std::move(b), false);
  };
  t["/grpc.health.v1.Health/Watch"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
    HealthCheck(std::move(c), std::move(b), true);
  };
  Restrict(t);
  return t;
}

void GrpcFrontend::Service::Restrict(MethodTable& t) const {
  using server::ApiGroup;
  // Triton's grouping (--grpc-restricted-protocol); grpc.health.v1 is in "health" too.
  static const std::pair<const char*, ApiGroup> kGroups[] = {
      {"ServerLive", ApiGroup::kHealth},
      {"ServerReady", ApiGroup::kHealth},
      {"ModelReady", ApiGroup::kHealth},
      {"ServerMetadata", ApiGroup::kMetadata},
      {"ModelMetadata", ApiGroup::kMetadata},
      {"ModelInfer", ApiGroup::kInference},
      {"ModelStreamInfer", ApiGroup::kInference},
      {"ModelConfig", ApiGroup::kModelConfig},
      {"ModelStatistics", ApiGroup::kStatistics},
      {"RepositoryIndex", ApiGroup::kModelRepository},
      {"RepositoryModelLoad", ApiGroup::kModelRepository},
      {"RepositoryModelUnload", ApiGroup::kModelRepository},
      {"SystemSharedMemoryStatus", ApiGroup::kSharedMemory},
      {"SystemSharedMemoryRegister", ApiGroup::kSharedMemory},
      {"SystemSharedMemoryUnregister", ApiGroup::kSharedMemory},
      {"CudaSharedMemoryStatus", ApiGroup::kSharedMemory},
      {"CudaSharedMemoryRegister", ApiGroup::kSharedMemory},
      {"CudaSharedMemoryUnregister", ApiGroup::kSharedMemory},
      {"TraceSetting", ApiGroup::kTrace},
      {"LogSettings", ApiGroup::kLogging},
  };
  auto restrict = [this, &t](const std::string& path, ApiGroup group) {
    if (restrictions_.RequiredHeader(group) == nullptr) return;
    t.at(path).admit = [this, group](const ServerCall& call) {
      Status s =
          restrictions_.Check(group, [&call](std::string_view n) { return call.Metadata(n); });
      if (s.ok()) return ::grpc::Status::OK;
      // Triton's words and code for a restricted protocol.
      return ::grpc::Status(::grpc::StatusCode::UNAVAILABLE,
                            "This protocol is restricted, expecting header '" +
                                *restrictions_.RequiredHeader(group) + "'");
    };
  };
  for (const auto& [method, group] : kGroups) restrict(kService + method, group);
  restrict("/dais.labels.v1.Labels/Post", ApiGroup::kInference);
  if (memory_ != nullptr) {
    for (const char* m : {"Upsert", "Delete", "Get", "Search"}) {
      restrict(std::string(kMemoryService) + m, ApiGroup::kMemory);
    }
  }
  restrict("/grpc.health.v1.Health/Check", ApiGroup::kHealth);
  restrict("/grpc.health.v1.Health/Watch", ApiGroup::kHealth);
}

GrpcFrontend::GrpcFrontend(GrpcOptions options, server::InferenceServer* server)
    : options_(std::move(options)),
      service_(std::make_unique<Service>(server, options_.restrictions, options_.labels,
                                         options_.memory)) {}

GrpcFrontend::~GrpcFrontend() { Stop(0); }

Status GrpcFrontend::Start() {
  H2ServerOptions o;
  static_cast<EndpointOptions&>(o) = options_;  // address, port, threads, max_connections
  o.h2.max_receive_message_bytes = static_cast<uint32_t>(options_.max_message_bytes);
  o.h2.max_send_message_bytes = static_cast<uint32_t>(options_.max_message_bytes);
  o.h2.max_buffered_bytes = 2 * static_cast<uint64_t>(options_.max_message_bytes);
  o.keepalive_time_ms = options_.keepalive_time_ms;
  o.keepalive_timeout_ms = options_.keepalive_timeout_ms;
  o.keepalive_permit_without_calls = options_.keepalive_permit_without_calls;
  o.max_pings_without_data = options_.http2_max_pings_without_data;
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
  server_->Stop(deadline_ms);
  server_.reset();
}

}  // namespace dais::frontends::grpc
