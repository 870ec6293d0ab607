#include "frontends/http/kserve_http.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>

#include "common/json.h"
#include "common/logging.h"
#include "dais/clock.h"
#include "metrics/registry.h"
#include "runtime/model_config.h"
#include "runtime/tensor_config.h"
#include "tensor/infer_codec.h"

namespace dais::http {
namespace {

Response Json(int status, std::string body) {
  return Response{status, "application/json", std::move(body), {}};
}
Response Error(int status, const std::string& message) { return Json(status, ErrorJson(message)); }
Response FromStatus(const Status& s) { return Error(HttpStatusFor(s.code()), s.message()); }

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j;
  }
  return parts;
}

bool ParseVersion(const std::string& s, int64_t* v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *v >= 0;
}

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteTensorMeta(Writer& w, const std::string& name, inference::DataType type,
                     const google::protobuf::RepeatedField<int64_t>& dims, bool batching) {
  w.StartObject();
  w.Key("name");
  w.String(name.c_str());
  w.Key("datatype");
  w.String(std::string(DataTypeName(ConfigDataType(type))).c_str());
  w.Key("shape");
  w.StartArray();
  if (batching) w.Int64(-1);
  for (int64_t d : dims) w.Int64(d);
  w.EndArray();
  w.EndObject();
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
    case StatusCode::kAlreadyExists:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kCancelled:
      return 499;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

void KServeHttp::JoinBackground() { background_.JoinAll(); }

void KServeHttp::Health(Responder& respond) {
  auto not_ready = manager_->NotReady();
  bool draining = state_->draining.load();
  rapidjson::StringBuffer sb;
  Writer w(sb);
  bool tier_ok = !tier_healthy_ || tier_healthy_();
  bool ok = not_ready.empty() && !draining && tier_ok;
  w.StartObject();
  w.Key("status");
  w.String(ok ? "ok" : "unhealthy");
  w.Key("checks");
  w.StartObject();
  w.Key("models");
  w.StartObject();
  w.Key("ok");
  w.Bool(not_ready.empty());
  w.Key("not_ready");
  w.StartObject();
  for (const auto& [m, why] : not_ready) {
    w.Key(m.c_str());
    w.String(why.c_str());
  }
  w.EndObject();
  w.EndObject();
  if (tier_healthy_) {
    w.Key("feature_store");
    w.StartObject();
    w.Key("ok");
    w.Bool(tier_ok);
    w.Key("tier");
    w.String(tier_name_.c_str());
    if (!tier_ok) {
      w.Key("reason");
      w.String((tier_name_ + " is not reachable; features are served from L1 or defaults").c_str());
    }
    w.EndObject();
  }
  w.Key("server");
  w.StartObject();
  w.Key("ok");
  w.Bool(!draining);
  if (draining) {
    w.Key("reason");
    w.String("shutting down");
  }
  w.EndObject();
  w.EndObject();
  w.EndObject();
  respond(Json(ok ? 200 : 503, sb.GetString()));
}

void KServeHttp::HandleMetricsOnly(Request req, Responder respond) {
  if (req.path == "/metrics") {
    return respond(Response{
        200, "text/plain; version=0.0.4; charset=utf-8", metrics::Registry::Global().Expose(), {}});
  }
  if (req.path == "/healthz") return Health(respond);
  respond(Error(404, "not found: " + req.path + " (this port serves /metrics and /healthz)"));
}

void KServeHttp::Handle(Request req, Responder respond) {
  const auto p = Split(req.path);
  const bool get = req.method == "GET", post = req.method == "POST";
  auto method_error = [&] {
    respond(Error(405, "method " + req.method + " not allowed on " + req.path));
  };
  if (req.path == "/metrics" || req.path == "/healthz") {
    if (!get) return method_error();
    return HandleMetricsOnly(std::move(req), std::move(respond));
  }
  if (req.path == "/get-online-features" || req.path == "/push") {
    if (feast_ == nullptr) {
      return respond(Error(404, req.path +
                                    ": this server has no feature store (give "
                                    "--feature-spec, --redis or models with features.yaml)"));
    }
    if (!post) return method_error();
    if (state_->draining.load()) return respond(Error(503, "server is shutting down"));
    state_->in_flight.fetch_add(1);
    auto reply = [respond, state = state_](int status, std::string body) {
      respond(Json(status, std::move(body)));
      state->in_flight.fetch_sub(1);
    };
    if (req.path == "/push") return feast_->Push(req.body, std::move(reply));
    return feast_->GetOnlineFeatures(req.body, std::move(reply));
  }
  if (p.empty() || p[0] != "v2") return respond(Error(404, "not found: " + req.path));
  if (p.size() == 1) {
    if (!get) return method_error();
    rapidjson::StringBuffer sb;
    Writer w(sb);
    w.StartObject();
    w.Key("name");
    w.String(kServerName);
    w.Key("version");
    w.String(kServerVersion);
    w.Key("extensions");
    w.StartArray();
    for (const char* e : ServerExtensions()) w.String(e);
    w.EndArray();
    w.EndObject();
    return respond(Json(200, sb.GetString()));
  }
  if (p[1] == "health" && p.size() == 3) {
    if (!get) return method_error();
    if (p[2] == "live") return respond(Json(200, ""));
    if (p[2] == "ready") {
      bool ready = !state_->draining.load() && manager_->Ready();
      return respond(ready ? Json(200, "")
                           : Error(400, state_->draining.load() ? "server is shutting down"
                                                                : "server is not ready"));
    }
  }
  if (p[1] == "repository") {
    if (!post) return method_error();
    if (p.size() == 3 && p[2] == "index") {
      bool ready_only = false;
      if (!req.body.empty()) {
        rapidjson::Document d;
        if (Status s = json::ParseJson(req.body, &d); !s.ok()) {
          return respond(Error(400, "repository index request: " + s.message()));
        }
        if (!d.IsObject()) {
          return respond(Error(400, "repository index request: the body must be a JSON object"));
        }
        if (d.HasMember("ready")) {
          if (!d["ready"].IsBool()) {
            return respond(Error(400, "repository index request: \"ready\": expected a boolean"));
          }
          ready_only = d["ready"].GetBool();
        }
      }
      rapidjson::StringBuffer sb;
      Writer w(sb);
      w.StartArray();
      for (const IndexEntry& e : manager_->Index(ready_only)) {
        w.StartObject();
        w.Key("name");
        w.String(e.name.c_str());
        if (!e.version.empty()) {
          w.Key("version");
          w.String(e.version.c_str());
        }
        w.Key("state");
        const std::string_view state = ModelStateName(e.state);
        w.String(state.data(), static_cast<rapidjson::SizeType>(state.size()));
        w.Key("reason");
        w.String(e.reason.c_str());
        w.EndObject();
      }
      w.EndArray();
      return respond(Json(200, sb.GetString()));
    }
    if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
      if (manager_->mode() != ModelControlMode::kExplicit) {
        return respond(Error(400,
                             "explicit model load / unload is not allowed unless "
                             "--model-control-mode=explicit"));
      }
      if (!req.body.empty()) {
        rapidjson::Document d;
        if (Status s = json::ParseJson(req.body, &d); !s.ok()) {
          return respond(Error(400, "repository " + p[4] + " request: " + s.message()));
        }
        if (!d.IsObject()) {
          return respond(
              Error(400, "repository " + p[4] + " request: the body must be a JSON object"));
        }
        if (d.HasMember("parameters") && d["parameters"].IsObject() &&
            d["parameters"].MemberCount() > 0 && p[4] == "load") {
          return respond(Error(400,
                               "load parameters (config / file overrides) are not "
                               "supported by dais"));
        }
      }
      if (state_->draining.load()) return respond(Error(503, "server is shutting down"));
      // Loading can take seconds: do it off the I/O thread.
      std::string model = p[3];
      bool load = p[4] == "load";
      state_->in_flight.fetch_add(1);
      background_.Run([this, model, load, respond = std::move(respond)] {
        Status s = load ? manager_->LoadModel(model) : manager_->UnloadModel(model);
        if (s.ok()) {
          respond(Json(200, ""));
        } else {
          // Not found: 404; lock waits and lost leases: retryable (503); a refused switch
          // (fencing): 409; a bad model: 400.
          int code =
              s.code() == StatusCode::kNotFound ? 404
              : s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded
                  ? 503
              : s.code() == StatusCode::kFailedPrecondition ? 409
                                                            : 400;
          respond(Error(code, (load ? "failed to load '" : "failed to unload '") + model +
                                  "': " + s.message()));
        }
        state_->in_flight.fetch_sub(1);
      });
      return;
    }
    return respond(Error(404, "not found: " + req.path));
  }
  if (p[1] == "models") {
    if (p.size() == 3 && p[2] == "stats") {
      if (!get) return method_error();
      // Statistics of every loaded model.
      std::string body = "{\"model_stats\":[";
      bool first = true;
      for (const IndexEntry& e : manager_->Index(true)) {
        int64_t v = 0;
        if (!ParseVersion(e.version, &v)) continue;
        auto mv = manager_->Find(e.name, v);
        if (!mv.ok()) continue;
        if (!first) body += ",";
        first = false;
        body += (*mv)->stats().ToJson(e.name, e.version);
      }
      body += "]}";
      return respond(Json(200, std::move(body)));
    }
    if (p.size() < 3) return respond(Error(404, "not found: " + req.path));
    const std::string& model = p[2];
    int64_t version = -1;
    size_t rest = 3;
    if (p.size() >= 5 && p[3] == "versions") {
      if (!ParseVersion(p[4], &version)) {
        return respond(Error(400, "invalid model version '" + p[4] + "'"));
      }
      rest = 5;
    }
    std::string action = p.size() > rest ? p[rest] : "";
    if (p.size() > rest + 1) return respond(Error(404, "not found: " + req.path));
    if (action == "infer") {
      if (!post) return method_error();
      return Infer(req, model, version, std::move(respond));
    }
    if (!get) return method_error();
    if (action.empty()) return Metadata(model, version, respond);
    auto mv = manager_->Find(model, version);
    if (action == "ready") {
      // Triton answers 400 for a model that is not ready; 404 stays for an unknown one.
      if (mv.ok()) return respond(Json(200, ""));
      return respond(
          Error(mv.status().code() == StatusCode::kNotFound ? 404 : 400, mv.status().message()));
    }
    if (!mv.ok()) return respond(FromStatus(mv.status()));
    if (action == "config") return respond(Json(200, ModelConfigToJson((*mv)->config())));
    if (action == "stats") {
      // Without a version: every ready version of the model, as Triton does.
      std::vector<std::shared_ptr<ModelVersion>> versions;
      if (version >= 0) {
        versions.push_back(*mv);
      } else {
        for (int64_t v : manager_->ReadyVersions(model)) {
          auto one = manager_->Find(model, v);
          if (one.ok()) versions.push_back(*one);
        }
      }
      std::string body = "{\"model_stats\":[";
      for (size_t i = 0; i < versions.size(); ++i) {
        if (i > 0) body += ",";
        body += versions[i]->stats().ToJson(model, std::to_string(versions[i]->version()));
      }
      body += "]}";
      return respond(Json(200, std::move(body)));
    }
  }
  respond(Error(404, "not found: " + req.path));
}

void KServeHttp::Metadata(const std::string& model, int64_t version, Responder& respond) {
  auto mv = manager_->Find(model, version);
  if (!mv.ok()) return respond(FromStatus(mv.status()));
  const auto& config = (*mv)->config();
  const bool batching = config.max_batch_size() > 0;
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("name");
  w.String(model.c_str());
  w.Key("versions");
  w.StartArray();
  if (version >= 0) {
    w.String(std::to_string(version).c_str());
  } else {
    for (int64_t v : manager_->ReadyVersions(model)) w.String(std::to_string(v).c_str());
  }
  w.EndArray();
  w.Key("platform");
  w.String(config.platform().empty() ? config.backend().c_str() : config.platform().c_str());
  w.Key("inputs");
  w.StartArray();
  for (const auto& in : config.input())
    WriteTensorMeta(w, in.name(), in.data_type(), in.dims(), batching);
  w.EndArray();
  w.Key("outputs");
  w.StartArray();
  for (const auto& out : config.output()) {
    WriteTensorMeta(w, out.name(), out.data_type(), out.dims(), batching);
  }
  w.EndArray();
  w.EndObject();
  respond(Json(200, sb.GetString()));
}

void KServeHttp::Infer(Request& req, const std::string& model, int64_t version, Responder respond) {
  if (state_->draining.load()) {
    return respond(Error(503, "server is shutting down; not accepting new inference requests"));
  }
  size_t header_length = 0;
  std::string_view hl = req.Header("inference-header-content-length");
  if (!hl.empty()) {
    auto r = std::from_chars(hl.data(), hl.data() + hl.size(), header_length);
    if (r.ec != std::errc() || r.ptr != hl.data() + hl.size()) {
      return respond(
          Error(400, "invalid Inference-Header-Content-Length '" + std::string(hl) + "'"));
    }
  }
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = model;
  request->model_version = version;
  request->arrival_ns = NowNs();
  if (Status s = ParseInferRequest(std::move(req.body), header_length, request.get()); !s.ok()) {
    return respond(FromStatus(s));
  }
  state_->in_flight.fetch_add(1);
  request->on_complete = [this,
                          respond = std::move(respond)](StatusOr<ResponsePtr> result) mutable {
    // Encode on an I/O thread, not on the model's instance thread.
    auto shared = std::make_shared<StatusOr<ResponsePtr>>(std::move(result));
    (*server_)->Post([this, respond = std::move(respond), shared]() mutable {
      if (!shared->ok()) {
        respond(FromStatus(shared->status()));
      } else {
        EncodedResponse enc = SerializeInferResponse(***shared);
        Response r;
        r.body = std::move(enc.body);
        if (enc.header_length > 0) {
          r.content_type = "application/octet-stream";
          r.headers.emplace_back("Inference-Header-Content-Length",
                                 std::to_string(enc.header_length));
        }
        respond(std::move(r));
      }
      state_->in_flight.fetch_sub(1);
    });
  };
  manager_->Infer(std::move(request));
}

}  // namespace dais::http
