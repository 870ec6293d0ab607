// Spans to an OpenTelemetry collector over OTLP/HTTP with the JSON encoding
// (https://opentelemetry.io/docs/specs/otlp/: POST <endpoint>/v1/traces,
// application/json, ids in hex). The gateway hands it one span per sampled request; a thread
// sends them in batches (every 500 ms, or at 256 spans), and a bounded queue drops what a slow
// or absent collector cannot take (counted) rather than slowing requests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/trace_context.h"
#include "dais/status.h"

namespace dais::gateway {

class UpstreamPool;

// The endpoint of --otlp-endpoint: "http://host:port[/path]" or "host:port" -> (host:port,
// path; path defaults to /v1/traces). InvalidArgument naming what is wrong.
StatusOr<std::pair<std::string, std::string>> ParseOtlpEndpoint(const std::string& endpoint);

// The OTLP JSON of one export request holding `spans` of `service`.
std::string OtlpTracesJson(const std::string& service, const std::vector<Span>& spans);

class OtlpExporter;

// The exporter of a --otlp-endpoint value as `service` ("dais-gateway", "dais-txn");
// InvalidArgument naming what is wrong with the endpoint.
StatusOr<std::unique_ptr<OtlpExporter>> NewOtlpExporter(const std::string& endpoint,
                                                        std::string service);

class OtlpExporter {
 public:
  OtlpExporter(std::string address, std::string path, std::string service);
  ~OtlpExporter();  // sends what is queued (up to 2 s)
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void Add(Span span);

 private:
  void Loop();
  void Send(std::vector<Span> batch);

  const std::string address_, path_, service_;
  std::unique_ptr<UpstreamPool> pool_;
  Mutex mu_;
  CondVar wake_{&mu_};
  std::vector<Span> queue_ DAIS_GUARDED_BY(mu_);
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  bool failing_ = false;  // the exporter thread's: log a failure once, until a send works
  std::thread thread_;
};

}  // namespace dais::gateway
