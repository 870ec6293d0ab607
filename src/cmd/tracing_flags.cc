#include "cmd/tracing_flags.h"

#include <CLI/CLI.hpp>

#include "common/logging.h"

namespace dais::cmd {

void AddTracingFlags(CLI::App* cmd, TracingFlags* flags, const std::string& what) {
  cmd->add_option("--otlp-endpoint", flags->otlp_endpoint,
                  "Tracing: send the spans of sampled " + what +
                      " to this OpenTelemetry collector (OTLP/HTTP JSON, e.g. "
                      "http://127.0.0.1:4318; path /v1/traces). Default: none. traceparent and "
                      "x-request-id go on to the next hop either way.");
  cmd->add_option("--trace-sample-rate", flags->trace_sample_rate,
                  "Share of " + what +
                      " without a traceparent whose new trace is sampled (with "
                      "--otlp-endpoint); one with a traceparent keeps its sampled flag.")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

StatusOr<std::unique_ptr<gateway::OtlpExporter>> StartSpanExporter(const TracingFlags& flags,
                                                                   const std::string& service,
                                                                   const std::string& what) {
  if (flags.otlp_endpoint.empty()) return std::unique_ptr<gateway::OtlpExporter>();
  auto exporter = gateway::NewOtlpExporter(flags.otlp_endpoint, service);
  if (!exporter.ok()) return InvalidArgument("--otlp-endpoint: " + exporter.status().message());
  LOG_INFO("tracing: spans of sampled {} to {} (new traces sampled at {:g})", what,
           flags.otlp_endpoint, flags.trace_sample_rate);
  return exporter;
}

}  // namespace dais::cmd
