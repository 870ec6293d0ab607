// Options of `dais perf` (named after Triton's perf_analyzer where it has the same flag) and
// parsing of the load ranges. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "tls/config.h"

namespace dais::perf {

struct PerfOptions {
  std::string model_name;
  std::string model_version;  // empty: the server's choice (highest ready version)
  std::string url;            // host:port; empty: localhost:8000 (http) / localhost:8001 (grpc)
  std::string protocol = "http";
  bool http_binary = false;  // binary tensor data extension for inputs and outputs
  bool grpc_stub = false;    // gRPC inference through grpc++'s sync stub
  int grpc_connections = 0;  // gRPC concurrency mode: connections (0: one per in-flight request)
  int64_t batch_size = 1;
  std::string concurrency_range;   // empty: "1:1" unless a request rate range is given
  std::string request_rate_range;  // non-empty: open-loop mode
  std::string request_distribution = "constant";  // or "poisson"
  int max_threads = 16;                           // sender threads in request-rate mode
  std::string input_data = "random";              // random | zero | FILE.json
  uint64_t seed = 1;
  int64_t string_length = 128;  // BYTES elements of generated data
  double warmup_secs = 1.0;
  int64_t measurement_interval_ms = 2000;
  double stability_percentage = 10.0;
  int max_trials = 10;
  std::string csv_file;
  std::string json_file;
  bool no_progress = false;
  // TLS, with perf_analyzer's flag names: --ssl-grpc-* for gRPC, --ssl-https-* (or an https://
  // URL) for HTTP.
  bool ssl_grpc_use_ssl = false;
  std::string ssl_grpc_root_certifications_file, ssl_grpc_private_key_file,
      ssl_grpc_certificate_chain_file;
  int ssl_https_verify_peer = 1;  // 0: do not verify the server's certificate
  int ssl_https_verify_host = 2;  // 0: do not check its name
  std::string ssl_https_ca_certificates_file, ssl_https_client_certificate_file,
      ssl_https_private_key_file;
};

// The load levels to measure, from a "start[:end[:step]]" range: step "N" adds N, "xN"
// multiplies by N; the default step is 1 (add). Levels never exceed `end`:
// "1:64:x2" -> 1,2,4,...,64; "1:10:3" -> 1,4,7,10; "8" -> 8.
// InvalidArgument (naming the flag and the problem) for a malformed range, start <= 0,
// end < start, a step that does not grow (0, x1), or more than 1000 levels.
StatusOr<std::vector<int64_t>> ParseConcurrencyRange(std::string_view flag, std::string_view text);
// The same for request rates, which may be fractional ("0.5:2:0.5").
StatusOr<std::vector<double>> ParseRateRange(std::string_view flag, std::string_view text);

// "host:port" (an "http://" or "grpc://" prefix and a trailing "/" are dropped; "[::1]:8000"
// for IPv6); a missing port gives `default_port`.
struct HostPort {
  std::string host;
  std::string port;
  bool tls = false;  // https:// or grpcs://
};
StatusOr<HostPort> ParseUrl(std::string_view url, int default_port);

// Checks option combinations and values (positive batch size, interval, trials...).
Status ValidateOptions(const PerfOptions& options);

}  // namespace dais::perf
