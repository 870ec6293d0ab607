// KServe v2 / Open Inference Protocol REST endpoints plus Triton's extensions (binary tensor
// data, model repository, statistics, model configuration), /metrics and /healthz.
// The one place where a dais Status becomes an HTTP status (HttpStatusFor).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "features/feast_api.h"
#include "frontends/background.h"
#include "frontends/http/http_server.h"
#include "frontends/server_state.h"
#include "runtime/model_manager.h"

namespace dais::http {

int HttpStatusFor(StatusCode code);

class KServeHttp {
 public:
  // `server` is used to run response encoding on I/O threads. All must outlive this object.
  KServeHttp(ModelManager* manager, Server** server, ServerState* state)
      : manager_(manager), server_(server), state_(state) {}

  // The Handler to give the Server.
  void Handle(Request request, Responder respond);
  // Serves only /metrics, /healthz and health (for a separate --metrics-port).
  void HandleMetricsOnly(Request request, Responder respond);

  // Serves Feast's /get-online-features and /push through `api` and reports the online tier's
  // reachability in /healthz (`tier_healthy`). Both borrowed; call before the server starts.
  void SetFeatures(features::FeastApi* api, std::function<bool()> tier_healthy,
                   std::string tier_name) {
    feast_ = api;
    tier_healthy_ = std::move(tier_healthy);
    tier_name_ = std::move(tier_name);
  }

  // Joins the threads that run repository load/unload requests. Call once ServerState::draining
  // is set (no new ones start) and before the Server stops (their responders post to it).
  void JoinBackground();

 private:
  void Infer(Request& request, const std::string& model, int64_t version, Responder respond);
  void Metadata(const std::string& model, int64_t version, Responder& respond);
  void Health(Responder& respond);

  ModelManager* manager_;
  Server** server_;
  ServerState* state_;
  features::FeastApi* feast_ = nullptr;
  std::function<bool()> tier_healthy_;
  std::string tier_name_;
  frontends::BackgroundTasks background_;  // repository load/unload requests
};

}  // namespace dais::http
