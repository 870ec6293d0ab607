// The gateway's gRPC side (docs/gateway.md): inference.GRPCInferenceService in front of the
// nodes' gRPC ports, with the same authentication, tenants, routes, balancing, retries and
// fallback as HTTP (gateway_impl.h). A request message is read only for its model name and
// version (proto_fields.h) and forwarded with them appended; the answer passes as bytes.
#include <grpcpp/support/status.h>
#include <rapidjson/document.h>

#include <algorithm>

#include "common/json.h"
#include "common/logging.h"
#include "gateway/gateway_impl.h"
#include "gateway/gateway_metrics.h"
#include "gateway/proto_fields.h"

namespace dais::gateway {
namespace {

using frontends::grpc::ServerCall;
using frontends::http::Response;

constexpr const char* kService = "/inference.GRPCInferenceService/";

// A server-side failure (counts against the node); client errors do not.
bool NodeFailed(const GrpcResult& r) {
  return r.code == 2 || r.code == 4 || r.code == 13 || r.code == 14 || r.code == 15;
}

std::string ErrorMessage(const Response& r) {
  rapidjson::Document d;
  if (json::ParseJson(r.body, &d).ok() && d.IsObject() && d.HasMember("error") &&
      d["error"].IsString()) {
    return d["error"].GetString();
  }
  return r.body;
}

// The request's metadata that goes on to the node (the token stays at the gateway).
std::vector<std::pair<std::string, std::string>> ForwardedMetadata(const ServerCall& sc) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : sc.metadata()) {
    if (k != "authorization" && k != "host" && k != "connection" && k != kHopsHeader) {
      out.emplace_back(k, v);
    }
  }
  out.emplace_back(kHopsHeader,
                   std::to_string(Hops(sc.Metadata(kHopsHeader).value_or(std::string_view())) + 1));
  return out;
}

// A ModelStreamInferResponse carrying only error_message (field 1), as Triton's stream answers a
// request it could not run.
std::string StreamError(const std::string& message) {
  std::string out;
  AppendStringField(&out, 1, message);
  return out;
}

// A one-bool answer (ServerLiveResponse, ServerReadyResponse, ModelReadyResponse): field 1.
std::string BoolMessage(bool value) { return value ? std::string("\x08\x01", 2) : std::string(); }

StatusOr<int64_t> AskedVersion(const std::string& version) {
  if (version.empty()) return int64_t{-1};
  if (version.size() > 18 || version.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("model_version '" + version + "' is not a version number");
  }
  return std::stoll(version);
}

}  // namespace

int HttpOfCode(int code) {
  switch (code) {
    case 0:
      return 200;
    case 1:
      return 499;
    case 3:
    case 9:
    case 11:
      return 400;
    case 5:
      return 404;
    case 7:
      return 403;
    case 8:
      return 429;
    case 12:
      return 501;
    case 14:
      return 503;
    case 4:
      return 504;
    case 16:
      return 401;
    default:
      return 500;
  }
}

void Gateway::Impl::RefuseGrpc(const CallPtr& call, const Response& refusal) {
  for (const auto& [k, v] : refusal.headers) {
    if (k == "retry-after") call->grpc->AddResponseMetadata(k, v);
  }
  call->grpc->AddResponseMetadata("x-dais-route", call->alias);
  call->grpc->AddResponseMetadata("x-request-id", call->request_id);
  call->grpc->Finish(
      ::grpc::Status(frontends::grpc::CodeOfHttpStatus(refusal.status), ErrorMessage(refusal)));
  Record(*call, refusal.status, 0, "");
  in_flight.fetch_sub(1);
}

void Gateway::Impl::TryGrpc(const CallPtr& call, const std::string& node) {
  auto address = call->view->node_grpc.find(node);
  if (address == call->view->node_grpc.end()) {
    // The node serves no gRPC: as if it refused the connection.
    if (Settle(*call, node, false, "connect_failed", true, "no gRPC port")) return Try(call);
    Response r{503, "", "", {}};
    r.body = "{\"error\":\"node " + node + " has no gRPC port\"}";
    return RefuseGrpc(call, r);
  }
  std::string message = call->request.body;  // the call keeps its copy for a retry
  if (call->model != call->alias) AppendStringField(&message, 1, call->model);
  AppendStringField(&message, 2, std::to_string(call->version));
  auto answer = std::make_shared<std::string>();
  GrpcCallOptions o;
  o.path = call->request.path;
  o.metadata = ForwardedMetadata(*call->grpc);
  Gateway::Impl::SetTraceHeaders(*call, &o.metadata);
  o.deadline = TryDeadline(*call);
  o.on_message = [answer](std::string m) { *answer = std::move(m); };
  o.on_finish = [this, call, node, answer](GrpcResult r) {
    call->grpc->OnCancelled(nullptr);  // the hook holds the upstream call, which holds this
    if (call->grpc->cancelled()->load()) {
      // The client gave up (its cancellation reset the node's call): no retry, no answer. The
      // try is settled all the same (the balancer counts it in flight until then), not as the
      // node's failure.
      Settle(*call, node, true, "cancelled", false, "");
      Record(*call, 499, 0, node);
      in_flight.fetch_sub(1);
      return;
    }
    const bool failed = NodeFailed(r);
    const char* outcome = !failed       ? "ok"
                          : r.not_sent  ? "connect_failed"
                          : r.timed_out ? "timeout"
                                        : "grpc_error";
    // A timeout before the request's deadline is the try's own (try_timeout_ms): another node.
    if (Settle(*call, node, !failed, outcome, r.not_sent || r.timed_out, r.message)) {
      return Try(call);
    }
    ServerCall& sc = *call->grpc;
    sc.AddResponseMetadata("x-dais-route", call->alias);
    sc.AddResponseMetadata("x-request-id", call->request_id);
    sc.AddResponseMetadata("x-dais-version", std::to_string(call->version));
    sc.AddResponseMetadata("x-dais-node", node);
    if (call->fallback) sc.AddResponseMetadata("x-dais-fallback", "stable");
    const size_t bytes = answer->size();
    if (r.code == 0) {
      sc.Reply(std::move(*answer));
    } else {
      sc.Finish(::grpc::Status(static_cast<::grpc::StatusCode>(r.code), r.message));
    }
    Record(*call, HttpOfCode(r.code), bytes, node);
    in_flight.fetch_sub(1);
  };
  auto up = grpc.StartUnary(address->second, std::move(o), std::move(message));
  // A client that cancels its call cancels the node's (RST_STREAM there too): the node drops
  // the request if it is still queued.
  call->grpc->OnCancelled([up] { up->Cancel(); });
}

void Gateway::Impl::MirrorGrpc(const Call& call) {
  const RouteSpec& route = *call.route;
  const std::string version = std::to_string(route.shadow_version);
  GatewayMetrics& m = GatewayMetrics::Get();
  const std::vector<std::string>* nodes = call.view->Nodes(call.model, route.shadow_version);
  auto address = nodes
                     ? call.view->node_grpc.find(balancer.Pick(*nodes, {}, Random(), Clock::now()))
                     : call.view->node_grpc.end();
  if (address == call.view->node_grpc.end()) {
    m.shadow.Get({call.alias, version, "no_instance"}).Increment();
    return;
  }
  std::string message = call.request.body;
  if (call.model != call.alias) AppendStringField(&message, 1, call.model);
  AppendStringField(&message, 2, version);
  GrpcCallOptions o;
  o.path = call.request.path;
  o.metadata = ForwardedMetadata(*call.grpc);
  Gateway::Impl::SetTraceHeaders(call, &o.metadata);
  o.deadline = call.deadline;
  o.on_finish = [alias = call.alias, version](GrpcResult r) {
    const char* outcome = r.code == 0     ? "ok"
                          : r.not_sent    ? "connect_failed"
                          : r.timed_out   ? "timeout"
                          : NodeFailed(r) ? "grpc_error"
                                          : "grpc_client_error";
    GatewayMetrics::Get().shadow.Get({alias, version, outcome}).Increment();
  };
  grpc.StartUnary(address->second, std::move(o), std::move(message));
}

namespace {

// A unary call for a model: ModelInfer, ModelReady, ModelMetadata, ModelConfig, ModelStatistics.
void HandleUnary(Gateway::Impl& g, const std::string& method, const std::string& suffix,
                 std::shared_ptr<ServerCall> sc, std::string bytes) {
  auto call = std::make_shared<Gateway::Impl::Call>();
  g.in_flight.fetch_add(1);  // until answered
  call->started = Clock::now();
  g.BeginTrace(call.get(), sc->Metadata("traceparent").value_or(std::string_view()),
               sc->Metadata("x-request-id").value_or(std::string_view()));
  call->grpc = std::move(sc);
  call->suffix = suffix;
  call->request.method = "POST";
  call->request.path = method;
  StatusOr<ModelRef> ref = ReadModelRef(bytes);
  StatusOr<int64_t> asked = ref.ok() ? AskedVersion(ref->version) : StatusOr<int64_t>(-1);
  if (ref.ok()) call->alias = ref->name;
  if (auto loop = RefuseLoop(call->Header(kHopsHeader))) return g.RefuseGrpc(call, *loop);
  if (auto refused = g.Authenticate(call->HeaderCount("authorization"),
                                    call->Header("authorization"), &call->tenant)) {
    call->tenant = call->tenant.empty() ? "-" : call->tenant;
    return g.RefuseGrpc(call, *refused);
  }
  const Status bad = !ref.ok()           ? ref.status()
                     : !asked.ok()       ? asked.status()
                     : ref->name.empty() ? InvalidArgument("the request names no model")
                                         : OkStatus();
  if (!bad.ok()) {
    call->grpc->Finish(::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT, bad.message()));
    g.Record(*call, 400, 0, "");
    g.in_flight.fetch_sub(1);
    return;
  }
  call->view = g.Current();
  if (auto refused = g.Admit(*call->view, call->tenant, call->alias)) {
    return g.RefuseGrpc(call, *refused);
  }
  if (auto refused = g.Resolve(call.get(), *asked)) return g.RefuseGrpc(call, *refused);
  if (const uint64_t us = call->grpc->timeout_us(); us > 0) {
    call->deadline = std::min(call->deadline, call->started + std::chrono::microseconds(us));
  }
  call->request.body = std::move(bytes);
  if (call->route != nullptr && call->route->shadow_version >= 0 &&
      call->route->shadow_version != call->version && call->is_infer() &&
      static_cast<double>(g.Random() % 10000) < call->route->shadow_percent * 100) {
    g.MirrorGrpc(*call);
  }
  g.budget.OnRequest(call->started);
  g.Try(std::move(call));
}

// ModelStreamInfer: the first request picks the version and the node (as a unary infer would,
// without retries); every request of the stream then goes to that node for that version, and
// every answer comes back as the node sends it. A stream carries one model. Each request is
// admitted by the tenant's token bucket; a refused one is answered in the stream with
// error_message, as Triton's stream answers a request it could not run.
class StreamProxy : public frontends::grpc::StreamHandler,
                    public std::enable_shared_from_this<StreamProxy> {
 public:
  StreamProxy(Gateway::Impl* g, std::shared_ptr<ServerCall> sc) : g_(g) {
    call_ = std::make_shared<Gateway::Impl::Call>();
    call_->started = Clock::now();
    g->BeginTrace(call_.get(), sc->Metadata("traceparent").value_or(std::string_view()),
                  sc->Metadata("x-request-id").value_or(std::string_view()));
    call_->grpc = std::move(sc);
    call_->request.method = "POST";
    call_->request.path = std::string(kService) + "ModelStreamInfer";
    call_->suffix = "/stream";
  }

  void OnMessage(std::string message) override {
    if (ended_) return;
    StatusOr<ModelRef> ref = ReadModelRef(message);
    if (!ref.ok()) return End(::grpc::StatusCode::INVALID_ARGUMENT, ref.status().message());
    if (!up_) {
      if (!Open(*ref)) return;
    } else if (ref->name != call_->alias) {
      return End(::grpc::StatusCode::INVALID_ARGUMENT,
                 "a stream through the gateway carries one model: it started with '" +
                     call_->alias + "', this request names '" + ref->name + "'");
    }
    if (auto refused = g_->Admit(*call_->view, call_->tenant, call_->alias)) {
      return call_->grpc->Write(StreamError(ErrorMessage(*refused)));
    }
    if (call_->model != call_->alias) AppendStringField(&message, 1, call_->model);
    AppendStringField(&message, 2, std::to_string(call_->version));
    messages_in_->Increment();
    up_->Send(std::move(message));
  }

  void OnHalfClose() override {
    if (up_) return up_->HalfClose();
    End(::grpc::StatusCode::OK, "");
  }

  void OnCancel() override { End(::grpc::StatusCode::CANCELLED, "cancelled by the client"); }

 private:
  // Authenticates, resolves the route and starts the call to a node; false when the stream
  // was ended instead.
  bool Open(const ModelRef& ref) {
    Gateway::Impl& g = *g_;
    g.in_flight.fetch_add(1);
    counted_ = true;
    call_->alias = ref.name;
    if (auto refused = g.Authenticate(call_->HeaderCount("authorization"),
                                      call_->Header("authorization"), &call_->tenant)) {
      End(frontends::grpc::CodeOfHttpStatus(refused->status), ErrorMessage(*refused));
      return false;
    }
    StatusOr<int64_t> asked = AskedVersion(ref.version);
    if (!asked.ok() || ref.name.empty()) {
      End(::grpc::StatusCode::INVALID_ARGUMENT,
          asked.ok() ? "the request names no model" : asked.status().message());
      return false;
    }
    call_->view = g.Current();
    if (auto refused = g.Resolve(call_.get(), *asked)) {
      End(frontends::grpc::CodeOfHttpStatus(refused->status), ErrorMessage(*refused));
      return false;
    }
    // A stream lives as long as the client keeps it: no route timeout, only the client's.
    call_->deadline = Clock::time_point::max();
    if (const uint64_t us = call_->grpc->timeout_us(); us > 0) {
      call_->deadline = call_->started + std::chrono::microseconds(us);
    }
    std::optional<std::string> node;
    const std::vector<std::string>* nodes = call_->view->Nodes(call_->model, call_->version);
    if (nodes == nullptr && call_->route != nullptr &&
        call_->view->Nodes(call_->model, call_->route->stable) != nullptr) {
      GatewayMetrics::Get().fallbacks.Get({call_->alias}).Increment();
      call_->fallback = true;
      call_->version = call_->route->stable;
      nodes = call_->view->Nodes(call_->model, call_->version);
    }
    auto address = call_->view->node_grpc.end();
    if (nodes != nullptr) {
      node_ = g.balancer.Pick(*nodes, {}, g.Random(), Clock::now());
      address = call_->view->node_grpc.find(node_);
    }
    if (address == call_->view->node_grpc.end()) {
      End(::grpc::StatusCode::UNAVAILABLE, "no READY instance with a gRPC port of model '" +
                                               call_->model + "' version " +
                                               std::to_string(call_->version));
      return false;
    }
    g.balancer.Start(node_);
    started_ = true;
    ServerCall& sc = *call_->grpc;
    sc.AddResponseMetadata("x-dais-route", call_->alias);
    sc.AddResponseMetadata("x-dais-version", std::to_string(call_->version));
    sc.AddResponseMetadata("x-dais-node", node_);
    if (call_->fallback) sc.AddResponseMetadata("x-dais-fallback", "stable");
    GrpcCallOptions o;
    o.path = call_->request.path;
    o.metadata = ForwardedMetadata(sc);
    Gateway::Impl::SetTraceHeaders(*call_, &o.metadata);
    o.deadline = call_->deadline;
    GatewayMetrics& m = GatewayMetrics::Get();
    messages_in_ = &m.stream_messages.Get({call_->alias, "in"});
    open_streams_ = &m.grpc_streams.Get({call_->alias});
    open_streams_->Add(1);
    o.on_message = [sc = call_->grpc,
                    out = &m.stream_messages.Get({call_->alias, "out"})](std::string msg) {
      out->Increment();
      sc->Write(std::move(msg));
    };
    o.on_finish = [self = shared_from_this()](GrpcResult r) {
      self->End(static_cast<::grpc::StatusCode>(r.code), r.message, &r);
    };
    up_ = g.grpc.Start(address->second, std::move(o));
    return true;
  }

  // Ends the client's stream (once); with `r`, the node's outcome is booked too.
  void End(::grpc::StatusCode code, const std::string& message, const GrpcResult* r = nullptr) {
    if (ended_.exchange(true)) return;
    if (r == nullptr && up_) up_->Cancel();  // (r set: on the upstream's strand, up_ is set)
    if (open_streams_ != nullptr) open_streams_->Add(-1);
    if (started_) {
      const bool failed = r != nullptr ? NodeFailed(*r) : false;
      g_->Settle(*call_, node_, !failed, failed ? "grpc_error" : "ok", false,
                 r != nullptr ? r->message : "");
    }
    call_->grpc->Finish(::grpc::Status(code, message));
    g_->Record(*call_, HttpOfCode(static_cast<int>(code)), 0, node_);
    if (counted_) g_->in_flight.fetch_sub(1);
  }

  Gateway::Impl* g_;
  Gateway::Impl::CallPtr call_;
  std::shared_ptr<GrpcUpstreamCall> up_;
  std::string node_;
  bool counted_ = false, started_ = false;
  metrics::Counter* messages_in_ = nullptr;  // set by Open
  metrics::Gauge* open_streams_ = nullptr;   // set by Open; released by End
  std::atomic<bool> ended_{false};
};

}  // namespace

frontends::grpc::MethodTable Gateway::GrpcMethods() {
  Impl* g = impl_.get();
  frontends::grpc::MethodTable t;
  const std::string service = kService;
  const std::pair<const char*, const char*> model_methods[] = {{"ModelInfer", "/infer"},
                                                               {"ModelReady", "/ready"},
                                                               {"ModelMetadata", ""},
                                                               {"ModelConfig", "/config"},
                                                               {"ModelStatistics", "/stats"}};
  for (const auto& [name, suffix] : model_methods) {
    const std::string method = service + name;
    t[method].unary = [g, method, suffix = std::string(suffix)](std::shared_ptr<ServerCall> sc,
                                                                std::string bytes) {
      HandleUnary(*g, method, suffix, std::move(sc), std::move(bytes));
    };
  }
  t[service + "ModelStreamInfer"].stream = [g](std::shared_ptr<ServerCall> sc) {
    return std::make_shared<StreamProxy>(g, std::move(sc));
  };
  t[service + "ServerLive"].unary = [](std::shared_ptr<ServerCall> sc, std::string) {
    sc->Reply(BoolMessage(true));
  };
  t[service + "ServerReady"].unary = [this](std::shared_ptr<ServerCall> sc, std::string) {
    sc->Reply(BoolMessage(Ready()));
  };
  t[service + "ServerMetadata"].unary = [](std::shared_ptr<ServerCall> sc, std::string) {
    std::string m;
    AppendStringField(&m, 1, "dais-gateway");
    AppendStringField(&m, 2, DAIS_VERSION);
    sc->Reply(std::move(m));
  };
  g->AddMemoryGrpcMethods(&t);
  t["/grpc.health.v1.Health/Check"].unary = [this](std::shared_ptr<ServerCall> sc, std::string) {
    sc->Reply(Ready() ? std::string("\x08\x01", 2) : std::string("\x08\x02", 2));
  };
  return t;
}

}  // namespace dais::gateway
