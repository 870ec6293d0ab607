// The tracing flags of the roles that export spans (`dais gateway`, `dais txn serve`;
// docs/operations.md, "Tracing").
#pragma once

#include <string>


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

}  // namespace dais::cmd
