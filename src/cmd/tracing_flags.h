// The tracing flags of the roles that export spans (`dais serve` / node, gateway, txn serve;
// docs/operations.md, "Tracing").
#pragma once

#include <memory>
#include <string>

#include "dais/status.h"
#include "gateway/otlp_exporter.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct TracingFlags {
  std::string otlp_endpoint;
  double trace_sample_rate = 0;
};

// --otlp-endpoint and --trace-sample-rate; `what` names the role's unit of work ("requests",
// "transactions").
void AddTracingFlags(CLI::App* cmd, TracingFlags* flags, const std::string& what);

// The exporter of --otlp-endpoint for `service` ("dais-node", "dais-txn"), its destination
// logged; null without the flag; InvalidArgument naming the flag when the endpoint is not one.
StatusOr<std::unique_ptr<gateway::OtlpExporter>> StartSpanExporter(const TracingFlags& flags,
                                                                   const std::string& service,
                                                                   const std::string& what);

}  // namespace dais::cmd
