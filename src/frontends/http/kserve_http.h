// KServe v2 / Open Inference Protocol REST endpoints plus Triton's extensions (binary tensor
// data, model repository, statistics, model configuration), /metrics and /healthz.
// The one place where a dais Status becomes an HTTP status (HttpStatusFor).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frontends/http/http_server.h"
#include "runtime/model_manager.h"

namespace dais::http {

int HttpStatusFor(StatusCode code);

class KServeHttp {
 public:
  // `server` is used to run response encoding on I/O threads. Both must outlive this object.
  KServeHttp(ModelManager* manager, Server** server) : manager_(manager), server_(server) {}

  // The Handler to give the Server.
  void Handle(Request request, Responder respond);
  // Serves only /metrics, /healthz and health (for a separate --metrics-port).
  void HandleMetricsOnly(Request request, Responder respond);

  // Shutdown: readiness goes false and new inference requests are refused.
  void StartDraining() { draining_.store(true); }
  // Inference and repository requests accepted and not yet answered.
  int64_t InFlight() const { return in_flight_.load(); }
  // Joins the threads that run repository load/unload requests. Call after StartDraining and
  // before the Server stops (their responders post to it).
  void JoinBackground();

 private:
  void Infer(Request& request, const std::string& model, int64_t version, Responder respond);
  void Metadata(const std::string& model, int64_t version, Responder& respond);
  void Health(Responder& respond);

  ModelManager* manager_;
  Server** server_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::mutex background_mu_;
  std::vector<std::thread> background_;  // repository load/unload requests
};

}  // namespace dais::http
