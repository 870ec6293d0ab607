#include "frontends/http/kserve_http.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <chrono>
#include <optional>

#include "common/json.h"
#include "dais/clock.h"
#include "frontends/http/http_status.h"
#include "frontends/http/infer_codec.h"
#include "frontends/listen.h"
#include "metrics/registry.h"
#include "runtime/model_config.h"
#include "server/trace_headers.h"

namespace dais::frontends::http {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
using server::ApiGroup;

// A request header by lower-case name; nullopt when absent (an empty value is present).
std::optional<std::string_view> FindHeader(const Request& request, std::string_view name) {
  for (const auto& [k, v] : request.headers) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

void WriteString(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void WriteTensors(Writer& w, const char* key, const std::vector<server::TensorMetadata>& ts) {
  w.Key(key);
  w.StartArray();
  for (const server::TensorMetadata& t : ts) {
    w.StartObject();
    w.Key("name");
    WriteString(w, t.name);
    w.Key("datatype");
    WriteString(w, t.datatype);
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

std::string MetadataJson(const server::ModelMetadata& m) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  WriteString(w, m.name);
  w.Key("versions");
  w.StartArray();
  for (const std::string& v : m.versions) WriteString(w, v);
  w.EndArray();
  w.Key("platform");
  WriteString(w, m.platform);
  WriteTensors(w, "inputs", m.inputs);
  WriteTensors(w, "outputs", m.outputs);
  w.EndObject();
  return sb.GetString();
}

// {"ok": bool[, "reason": text]} as the last members of an open object.
void WriteCheck(Writer& w, bool ok, const std::string& reason) {
  w.Key("ok");
  w.Bool(ok);
  if (!ok && !reason.empty()) {
    w.Key("reason");
    WriteString(w, reason);
  }
}

std::string HealthJson(const server::HealthReport& h) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("status");
  w.String(h.ok ? "ok" : "unhealthy");
  w.Key("checks");
  w.StartObject();
  w.Key("models");
  w.StartObject();
  WriteCheck(w, h.models_not_ready.empty(), "");
  w.Key("not_ready");
  w.StartObject();
  for (const auto& [model, why] : h.models_not_ready) {
    w.Key(model.c_str());
    WriteString(w, why);
  }
  w.EndObject();
  w.EndObject();
  if (h.has_feature_store) {
    w.Key("feature_store");
    w.StartObject();
    w.Key("tier");
    WriteString(w, h.feature_tier);
    WriteCheck(w, h.feature_store_ok,
               h.feature_tier + " is not reachable; features are served from L1 or defaults");
    w.EndObject();
  }
  w.Key("server");
  w.StartObject();
  WriteCheck(w, !h.draining, "shutting down");
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

std::string IndexJson(const std::vector<runtime::IndexEntry>& entries) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  for (const runtime::IndexEntry& e : entries) {
    w.StartObject();
    w.Key("name");
    WriteString(w, e.name);
    if (!e.version.empty()) {
      w.Key("version");
      WriteString(w, e.version);
    }
    w.Key("state");
    WriteString(w, runtime::ModelStateName(e.state));
    w.Key("reason");
    WriteString(w, e.reason);
    w.EndObject();
  }
  w.EndArray();
  return sb.GetString();
}

// The optional JSON object body of a repository request; `what` names it in errors.
StatusOr<rapidjson::Document> ObjectBody(const std::string& body, const std::string& what,
                                         int max_depth) {
  rapidjson::Document d;
  if (body.empty()) {
    d.SetObject();
    return d;
  }
  if (Status s = json::ParseJson(body, &d, max_depth); !s.ok()) return s.WithPrefix(what);
  if (!d.IsObject()) return InvalidArgument(what + ": the body must be a JSON object");
  return d;
}

StatusOr<int64_t> ParseVersion(const std::string& s) {
  int64_t v = -1;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) {
    return InvalidArgument("invalid model version '" + s + "'");
  }
  return v;
}

// The Inference-Header-Content-Length header (binary tensor data extension); nullopt when absent.
StatusOr<std::optional<size_t>> HeaderLength(const Request& request) {
  std::optional<std::string_view> hl = FindHeader(request, "inference-header-content-length");
  if (!hl) return std::optional<size_t>();
  size_t n = 0;
  auto r = std::from_chars(hl->data(), hl->data() + hl->size(), n);
  if (r.ec != std::errc() || r.ptr != hl->data() + hl->size()) {
    return InvalidArgument("invalid Inference-Header-Content-Length '" + std::string(*hl) + "'");
  }
  return std::optional<size_t>(n);
}

Response InferResponse(const runtime::InferenceResponse& response) {
  EncodedResponse enc = SerializeInferResponse(response);
  Response r;
  r.body = std::move(enc.body);
  r.compressible = true;
  if (enc.header_length > 0) {
    r.content_type = "application/octet-stream";
    r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(enc.header_length));
  }
  return r;
}

}  // namespace

KServeHttp::KServeHttp(server::InferenceServer* server, Server** io, KServeHttpOptions options)
    : server_(server), io_(io), options_(std::move(options)) {
  AddRoutes();
  AddMemoryRoutes();
  AddUnimplementedRoutes();
}

Router::Route KServeHttp::Guard(ApiGroup group, Router::Route route) const {
  return [this, group, route = std::move(route)](Request& q, const RouteParams& p, Responder& w) {
    Status s = options_.restrictions.Check(
        group, [&q](std::string_view name) { return FindHeader(q, name); });
    if (!s.ok()) return w(ErrorResponse(s));
    route(q, p, w);
  };
}

void KServeHttp::AddUnimplementedRoutes() {
  struct Extension {
    const char* what;
    ApiGroup group;
    std::vector<const char*> patterns;
  };
  const Extension kExtensions[] = {
      {"system shared memory",
       ApiGroup::kSharedMemory,
       {"/v2/systemsharedmemory/{action}", "/v2/systemsharedmemory/region/{region}/{action}"}},
      {"CUDA shared memory",
       ApiGroup::kSharedMemory,
       {"/v2/cudasharedmemory/{action}", "/v2/cudasharedmemory/region/{region}/{action}"}},
      {"trace", ApiGroup::kTrace, {"/v2/trace/setting", "/v2/models/{model}/trace/setting"}},
      {"logging", ApiGroup::kLogging, {"/v2/logging"}},
      {"generate",
       ApiGroup::kInference,
       {"/v2/models/{model}/generate", "/v2/models/{model}/versions/{version}/generate",
        "/v2/models/{model}/generate_stream",
        "/v2/models/{model}/versions/{version}/generate_stream"}},
  };
  for (const Extension& e : kExtensions) {
    for (const char* pattern : e.patterns) {
      router_.Add(
          "*", pattern,
          Guard(e.group, [what = std::string(e.what)](Request&, const RouteParams&, Responder& w) {
            w(ErrorResponse(
                Unimplemented("the " + what + " extension is not implemented by dais")));
          }));
    }
  }
}

void KServeHttp::AddRoutes() {
  // /metrics is in no group (Triton serves it on its own port, unrestricted).
  for (Router* r : {&router_, &metrics_router_}) {
    r->Add("GET", "/metrics", [this](Request&, const RouteParams&, Responder& w) { Metrics(w); });
    r->Add("GET", "/healthz",
           Guard(ApiGroup::kHealth,
                 [this](Request&, const RouteParams&, Responder& w) { Health(w); }));
  }
  router_.Add("*", "/get-online-features",
              Guard(ApiGroup::kFeatures, [this](Request& q, const RouteParams&, Responder& w) {
                Features(q, /*push=*/false, w);
              }));
  router_.Add("*", "/push",
              Guard(ApiGroup::kFeatures, [this](Request& q, const RouteParams&, Responder& w) {
                Features(q, /*push=*/true, w);
              }));
  router_.Add("*", "/labels",
              Guard(ApiGroup::kInference,
                    [this](Request& q, const RouteParams&, Responder& w) { Labels(q, w); }));
  metrics_router_.SetNotFoundHint("this port serves /metrics and /healthz");
  router_.Add("GET", "/v2",
              Guard(ApiGroup::kMetadata,
                    [this](Request&, const RouteParams&, Responder& w) { ServerMetadata(w); }));
  router_.Add("GET", "/v2/health/live",
              Guard(ApiGroup::kHealth,
                    [](Request&, const RouteParams&, Responder& w) { w(JsonResponse(200, "")); }));
  router_.Add(
      "GET", "/v2/health/ready",
      Guard(ApiGroup::kHealth, [this](Request&, const RouteParams&, Responder& w) { Ready(w); }));
  router_.Add("POST", "/v2/repository/index",
              Guard(ApiGroup::kModelRepository, [this](Request& q, const RouteParams&,
                                                       Responder& w) { RepositoryIndex(q, w); }));
  for (auto action : {server::RepositoryAction::kLoad, server::RepositoryAction::kUnload}) {
    const bool load = action == server::RepositoryAction::kLoad;
    router_.Add(
        "POST",
        load ? "/v2/repository/models/{model}/load" : "/v2/repository/models/{model}/unload",
        Guard(ApiGroup::kModelRepository,
              [this, action](Request& q, const RouteParams& p, Responder& w) {
                RepositoryControl(q, p.Get("model"), action, w);
              }));
  }
  // Before /v2/models/{model}: "stats" is not a model name here.
  router_.Add("GET", "/v2/models/stats",
              Guard(ApiGroup::kStatistics,
                    [this](Request&, const RouteParams&, Responder& w) { Statistics("", -1, w); }));
  AddModelRoute(
      "GET", "", ApiGroup::kMetadata,
      [this](Request&, const std::string& m, int64_t v, Responder& w) { ModelMetadata(m, v, w); });
  AddModelRoute(
      "GET", "/ready", ApiGroup::kHealth,
      [this](Request&, const std::string& m, int64_t v, Responder& w) { ModelReady(m, v, w); });
  AddModelRoute(
      "GET", "/config", ApiGroup::kModelConfig,
      [this](Request&, const std::string& m, int64_t v, Responder& w) { ModelConfig(m, v, w); });
  AddModelRoute(
      "GET", "/stats", ApiGroup::kStatistics,
      [this](Request&, const std::string& m, int64_t v, Responder& w) { Statistics(m, v, w); });
  AddModelRoute(
      "POST", "/infer", ApiGroup::kInference,
      [this](Request& q, const std::string& m, int64_t v, Responder& w) { Infer(q, m, v, w); });
}

void KServeHttp::AddModelRoute(const std::string& method, const std::string& suffix, ApiGroup group,
                               ModelRoute route) {
  router_.Add(method, "/v2/models/{model}" + suffix,
              Guard(group, [route](Request& q, const RouteParams& p, Responder& w) {
                route(q, p.Get("model"), -1, w);
              }));
  router_.Add(method, "/v2/models/{model}/versions/{version}" + suffix,
              Guard(group, [route](Request& q, const RouteParams& p, Responder& w) {
                StatusOr<int64_t> v = ParseVersion(p.Get("version"));
                if (!v.ok()) return w(ErrorResponse(v.status()));
                route(q, p.Get("model"), *v, w);
              }));
}

void KServeHttp::Metrics(Responder& respond) {
  Response r{
      200, "text/plain; version=0.0.4; charset=utf-8", metrics::Registry::Global().Expose(), {}};
  r.compressible = true;
  respond(std::move(r));
}

void KServeHttp::Health(Responder& respond) {
  server::HealthReport h = server_->Health();
  respond(JsonResponse(h.ok ? 200 : 503, HealthJson(h)));
}

void KServeHttp::ServerMetadata(Responder& respond) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  w.String(server::kServerName);
  w.Key("version");
  w.String(server::kServerVersion);
  w.Key("extensions");
  w.StartArray();
  for (const char* e : server::ServerExtensions()) w.String(e);
  w.EndArray();
  w.EndObject();
  respond(JsonResponse(200, sb.GetString()));
}

void KServeHttp::Ready(Responder& respond) {
  Status s = server_->Ready();
  respond(s.ok() ? JsonResponse(200, "") : ErrorResponse(s));
}

void KServeHttp::RepositoryIndex(const Request& request, Responder& respond) {
  StatusOr<rapidjson::Document> d =
      ObjectBody(request.body, "repository index request", options_.max_json_depth);
  if (!d.ok()) return respond(ErrorResponse(d.status()));
  bool ready_only = false;
  if (d->HasMember("ready")) {
    if (!(*d)["ready"].IsBool()) {
      return respond(ErrorResponse(
          InvalidArgument("repository index request: \"ready\": expected a boolean")));
    }
    ready_only = (*d)["ready"].GetBool();
  }
  respond(JsonResponse(200, IndexJson(server_->Index(ready_only))));
}

void KServeHttp::RepositoryControl(const Request& request, const std::string& model,
                                   server::RepositoryAction action, Responder& respond) {
  const bool load = action == server::RepositoryAction::kLoad;
  StatusOr<rapidjson::Document> d =
      ObjectBody(request.body, std::string("repository ") + (load ? "load" : "unload") + " request",
                 options_.max_json_depth);
  if (!d.ok()) return respond(ErrorResponse(d.status()));
  const bool has_parameters = d->HasMember("parameters") && (*d)["parameters"].IsObject() &&
                              (*d)["parameters"].MemberCount() > 0;
  Status s = server_->Repository(action, model, has_parameters, [respond](Status result) {
    respond(result.ok() ? JsonResponse(200, "") : ErrorResponse(result));
  });
  if (!s.ok()) respond(ErrorResponse(s));
}

void KServeHttp::Statistics(const std::string& model, int64_t version, Responder& respond) {
  auto stats = server_->Statistics(model, version);
  if (!stats.ok()) return respond(ErrorResponse(stats.status()));
  std::string body = "{\"model_stats\":[";
  for (size_t i = 0; i < stats->size(); ++i) {
    const server::VersionStatistics& s = (*stats)[i];
    if (i > 0) body += ",";
    body += s.version->stats().ToJson(s.name, std::to_string(s.version->version()));
  }
  body += "]}";
  respond(JsonResponse(200, std::move(body)));
}

void KServeHttp::ModelMetadata(const std::string& model, int64_t version, Responder& respond) {
  auto m = server_->Metadata(model, version);
  respond(m.ok() ? JsonResponse(200, MetadataJson(*m)) : ErrorResponse(m.status()));
}

void KServeHttp::ModelReady(const std::string& model, int64_t version, Responder& respond) {
  // Triton answers 400 for a model that is not ready; 404 stays for an unknown one.
  Status s = server_->ModelReady(model, version);
  respond(s.ok() ? JsonResponse(200, "") : ErrorResponse(s));
}

void KServeHttp::ModelConfig(const std::string& model, int64_t version, Responder& respond) {
  auto mv = server_->Find(model, version);
  if (!mv.ok()) return respond(ErrorResponse(mv.status()));
  respond(JsonResponse(200, runtime::ModelConfigToJson((*mv)->config())));
}

void KServeHttp::Infer(Request& request, const std::string& model, int64_t version,
                       Responder& respond) {
  // Refused before the body is parsed; Infer checks again (a drain may begin in between).
  if (Status s = server_->AcceptingInference(); !s.ok()) return respond(ErrorResponse(s));
  StatusOr<std::optional<size_t>> header_length = HeaderLength(request);
  if (!header_length.ok()) return respond(ErrorResponse(header_length.status()));
  auto r = std::make_unique<runtime::InferenceRequest>();
  r->model_name = model;
  r->model_version = version;
  r->arrival_ns = NowNs();
  Status parsed = *header_length == 0
                      ? ParseRawRequest(request, model, version, r.get())
                      : ParseInferRequest(std::move(request.body), header_length->value_or(0),
                                          r.get(), options_.max_json_depth);
  if (!parsed.ok()) return respond(ErrorResponse(parsed));
  server::ApplyTraceHeaders([&request](std::string_view n) { return request.Header(n); }, r.get());
  // This I/O thread holds no lock the answer needs: an idle instance may run the request here.
  r->may_run_inline = true;
  // The connection's I/O thread: the answer is encoded there (one hand-off from a model's thread,
  // none when it ran inline).
  boost::asio::io_context* home = frontends::CurrentIoContext();
  server_->Infer(std::move(r),
                 [this, home, respond = std::move(respond)](StatusOr<runtime::ResponsePtr> result,
                                                            server::InFlight in_flight) {
                   if (!result.ok()) return respond(ErrorResponse(result.status()));
                   if (home != nullptr && frontends::CurrentIoContext() == home) {
                     return respond(InferResponse(**result));
                   }
                   // Encode on an I/O thread, not on the model's instance thread.
                   auto shared = std::make_shared<runtime::ResponsePtr>(std::move(*result));
                   auto encode = [respond, shared, in_flight] { respond(InferResponse(**shared)); };
                   if (home != nullptr) return boost::asio::post(*home, std::move(encode));
                   (*io_)->Post(std::move(encode));
                 });
}

Status KServeHttp::ParseRawRequest(Request& request, const std::string& model, int64_t version,
                                   runtime::InferenceRequest* r) const {
  ASSIGN_OR_RETURN(server::ModelMetadata m, server_->Metadata(model, version));
  if (m.inputs.size() != 1) {
    return InvalidArgument(
        "a raw binary request (Inference-Header-Content-Length: 0) needs a model with one "
        "input; '" +
        model + "' has " + std::to_string(m.inputs.size()) + ": send a JSON inference header");
  }
  const server::TensorMetadata& in = m.inputs[0];
  std::vector<int64_t> shape = in.shape;
  if (in.datatype == "BYTES") {
    // One raw body is one string: only an input of exactly one element can take it (Triton
    // refuses the rest with the same words).
    const bool one = m.max_batch_size > 0 ? shape == std::vector<int64_t>{-1, 1}
                                          : shape == std::vector<int64_t>{1};
    if (!one) {
      return InvalidArgument("For BYTE datatype raw input '" + in.name +
                             "', the model must have input shape [1]");
    }
  }
  if (m.max_batch_size > 0) shape[0] = 1;  // without a header: a batch of one, as Triton does
  return ParseRawInferRequest(std::move(request.body), in.name, DataTypeFromName(in.datatype),
                              std::move(shape), r);
}

void KServeHttp::Features(Request& request, bool push, Responder& respond) {
  if (feast_ == nullptr) {
    return respond(ErrorResponse(
        404, request.path +
                 ": this server has no feature store (give --feature-spec, --redis or models "
                 "with features.yaml)"));
  }
  if (request.method != "POST") {
    return respond(
        ErrorResponse(405, "method " + request.method + " not allowed on " + request.path));
  }
  auto admitted = server_->Admit();
  if (!admitted.ok()) return respond(ErrorResponse(admitted.status()));
  auto reply = [respond, in_flight = *admitted](StatusOr<std::string> json) {
    if (!json.ok()) return respond(ErrorResponse(json.status()));
    Response r = JsonResponse(200, std::move(*json));
    r.compressible = true;  // Feast clients decompress
    respond(std::move(r));
  };
  if (push) return feast_->Push(request.body, std::move(reply));
  feast_->GetOnlineFeatures(request.body, std::move(reply));
}

Router::Route KServeHttp::MemoryRoute(
    std::function<void(Request&, const RouteParams&, Responder&)> route) {
  return Guard(ApiGroup::kMemory, [this, route = std::move(route)](Request& q, const RouteParams& p,
                                                                   Responder& w) {
    if (memory_ == nullptr) {
      return w(ErrorResponse(404, q.path + ": this server has no vector memory (start it with "
                                           "--memory; docs/memory.md)"));
    }
    route(q, p, w);
  });
}

void KServeHttp::AddMemoryRoutes() {
  const std::string base = "/v2/memory/collections";
  router_.Add("GET", base, MemoryRoute([this](Request&, const RouteParams&, Responder& w) {
                memory_->List(w);
              }));
  router_.Add("POST", base, MemoryRoute([this](Request& q, const RouteParams&, Responder& w) {
                memory_->Create(q, w);
              }));
  router_.Add("GET", base + "/{c}",
              MemoryRoute([this](Request&, const RouteParams& p, Responder& w) {
                memory_->Describe(p.Get("c"), w);
              }));
  router_.Add("DELETE", base + "/{c}",
              MemoryRoute([this](Request&, const RouteParams& p, Responder& w) {
                memory_->Drop(p.Get("c"), w);
              }));
  for (const char* op : {"upsert", "delete", "get", "search"}) {
    router_.Add(
        "POST", base + "/{c}/" + op,
        MemoryRoute([this, op = std::string(op)](Request& q, const RouteParams& p, Responder& w) {
          memory_->Points(q, p.Get("c"), op, w);
        }));
  }
}

void KServeHttp::Labels(Request& request, Responder& respond) {
  if (labels_ == nullptr) {
    return respond(ErrorResponse(404,
                                 "/labels: this server has no label stream (give --label-stream "
                                 "redis://HOST:PORT/STREAM)"));
  }
  if (request.method != "POST") {
    return respond(ErrorResponse(405, "method " + request.method + " not allowed on /labels"));
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto labels = server::ParseLabels(request.body, now_ms);
  if (!labels.ok()) return respond(ErrorResponse(labels.status()));
  auto admitted = server_->Admit();
  if (!admitted.ok()) return respond(ErrorResponse(admitted.status()));
  const size_t n = labels->size();
  labels_->Write(std::move(*labels), [respond, n, in_flight = *admitted](Status s) {
    if (!s.ok()) return respond(ErrorResponse(s));
    respond(JsonResponse(200, "{\"accepted\":" + std::to_string(n) + "}"));
  });
}

}  // namespace dais::frontends::http
