// KServe v2 / Open Inference Protocol REST endpoints plus Triton's extensions (binary tensor
// data, model repository, statistics, model configuration), Feast's feature endpoints, /metrics
// and /healthz: a codec over server::InferenceServer. Each route parses its request, calls one
// operation of the server and encodes the answer; a Status becomes an HTTP status only in
// http_status.h.
#pragma once

#include <functional>
#include <string>

#include "frontends/http/feast_http.h"
#include "frontends/http/http_server.h"
#include "frontends/http/memory_http.h"
#include "frontends/http/router.h"
#include "server/api_restrictions.h"
#include "server/inference_server.h"
#include "server/labels.h"

namespace dais::frontends::http {

struct KServeHttpOptions {
  // JSON bodies nested deeper are refused (the Server's scanner applies the same limit earlier).
  int max_json_depth = 100;
  // --http-restricted-api: groups of routes that need a header (403 without it).
  server::ApiRestrictions restrictions;
};

class KServeHttp {
 public:
  // `io` is the Server this handler is given to (set before it serves); response encoding runs
  // on its I/O threads. Both borrowed; they must outlive this object.
  KServeHttp(server::InferenceServer* server, Server** io, KServeHttpOptions options = {});
  // Its routes capture `this`.
  KServeHttp(const KServeHttp&) = delete;
  KServeHttp& operator=(const KServeHttp&) = delete;

  // The Handler to give the Server.
  void Handle(Request request, Responder respond) { router_.Dispatch(request, respond); }
  // Serves only /metrics and /healthz (for a separate --metrics-port).
  void HandleMetricsOnly(Request request, Responder respond) {
    metrics_router_.Dispatch(request, respond);
  }

  // Serves Feast's /get-online-features and /push through `feast` (borrowed). Call before the
  // server starts; without it those paths answer 404 naming the flags that enable them.
  void SetFeatures(FeastHttp* feast) { feast_ = feast; }
  // Serves POST /labels (server/labels.h) into `labels` (borrowed). Without it: 404 naming
  // --label-stream. In the restricted-API group "inference".
  void SetLabels(server::LabelSink* labels) { labels_ = labels; }
  // Serves /v2/memory/... (memory_http.h) through `memory` (borrowed). Without it: 404 naming
  // --memory. In the restricted-API group "memory".
  void SetMemory(MemoryHttp* memory) { memory_ = memory; }

 private:
  using ModelRoute =
      std::function<void(Request&, const std::string& model, int64_t version, Responder&)>;
  void AddRoutes();
  // `route`, answering 403 first when `group` is restricted and the request lacks its header.
  Router::Route Guard(server::ApiGroup group, Router::Route route) const;
  // Adds `method` /v2/models/{model}[/versions/{version}]`suffix`, in `group`.
  void AddModelRoute(const std::string& method, const std::string& suffix, server::ApiGroup group,
                     ModelRoute route);
  // Triton's extensions dais does not implement (shared memory, trace, logging, generate): 501
  // naming the extension, behind their groups' restrictions.
  void AddUnimplementedRoutes();

  void ServerMetadata(Responder& respond);
  void Health(Responder& respond);
  void Metrics(Responder& respond);
  void Ready(Responder& respond);
  void RepositoryIndex(const Request& request, Responder& respond);
  void RepositoryControl(const Request& request, const std::string& model,
                         server::RepositoryAction action, Responder& respond);
  void Statistics(const std::string& model, int64_t version, Responder& respond);
  void ModelMetadata(const std::string& model, int64_t version, Responder& respond);
  void ModelReady(const std::string& model, int64_t version, Responder& respond);
  void ModelConfig(const std::string& model, int64_t version, Responder& respond);
  void Infer(Request& request, const std::string& model, int64_t version, Responder& respond);
  // Inference-Header-Content-Length: 0: the body is the raw bytes of the model's one input.
  Status ParseRawRequest(Request& request, const std::string& model, int64_t version,
                         runtime::InferenceRequest* r) const;
  void Features(Request& request, bool push, Responder& respond);
  void Labels(Request& request, Responder& respond);
  void AddMemoryRoutes();
  // The memory routes' route: 404 naming the flag when this server has no vector memory.
  Router::Route MemoryRoute(std::function<void(Request&, const RouteParams&, Responder&)> route);

  server::InferenceServer* server_;
  Server** io_;
  const KServeHttpOptions options_;
  FeastHttp* feast_ = nullptr;
  server::LabelSink* labels_ = nullptr;
  MemoryHttp* memory_ = nullptr;
  Router router_;
  Router metrics_router_;
};

}  // namespace dais::frontends::http
