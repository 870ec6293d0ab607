// Tracing in the gateway (docs/operations.md, "Tracing"): the W3C trace context of a call, the
// headers that carry it to the node, the span exported for a sampled call; and the access log.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "fmt/format.h"
#include "gateway/gateway_impl.h"

namespace dais::gateway {

void Gateway::Impl::BeginTrace(Call* call, std::string_view traceparent,
                               std::string_view request_id) {
  ServerTrace t = BeginServerTrace(traceparent, request_id,
                                   exporter != nullptr ? options.trace_sample_rate : 0);
  call->trace = std::move(t.trace);
  call->span_id = std::move(t.span_id);
  call->request_id = std::move(t.request_id);
  call->start_unix_ns = t.start_unix_ns;
}

void Gateway::Impl::SetTraceHeaders(const Call& call,
                                    std::vector<std::pair<std::string, std::string>>* headers) {
  std::erase_if(*headers, [](const auto& kv) {
    return kv.first == "traceparent" || kv.first == "x-request-id";
  });
  headers->emplace_back("traceparent", call.trace.Header(call.span_id));
  headers->emplace_back("x-request-id", call.request_id);
}

void Gateway::Impl::ExportSpan(const Call& call, int status, const std::string& node) {
  if (exporter == nullptr || !call.trace.sampled() || call.span_id.empty()) return;
  Span span;
  span.trace_id = call.trace.trace_id;
  span.span_id = call.span_id;
  span.parent_id = call.trace.parent_id;
  span.name =
      (call.grpc ? "GRPC " : call.request.method + " ") + "/v2/models/{route}" + call.suffix;
  span.start_unix_ns = call.start_unix_ns;
  span.end_unix_ns =
      call.start_unix_ns +
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - call.started).count();
  span.error = status >= 500;
  span.string_attributes = {{"dais.route", call.alias},
                            {"dais.model", call.model},
                            {"dais.tenant", call.tenant},
                            {"dais.node", node},
                            {"dais.request_id", call.request_id}};
  span.int_attributes = {{"http.response.status_code", status},
                         {"dais.version", call.version},
                         {"dais.tries", static_cast<int64_t>(call.tried.size())}};
  exporter->Add(std::move(span));
}

void Gateway::Impl::LogAccess(const Call& call, int status, size_t response_bytes,
                              const std::string& node) {
  if (access_log == nullptr) return;
  if (status < 500 && static_cast<double>(Random() % 1000000) >= options.access_log_sample * 1e6) {
    return;
  }
  const auto now = std::chrono::system_clock::now();
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto str = [&w](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("time", fmt::format("{}.{:03d}Z", stamp, ms % 1000));
  str("method", call.grpc ? "GRPC" : call.request.method);
  str("route", call.alias);
  str("model", call.model);
  w.Key("version");
  w.Int64(call.version);
  str("choice", call.how);
  str("tenant", call.tenant);
  str("node", node);
  str("trace_id", call.trace.trace_id);
  str("span_id", call.span_id);
  str("request_id", call.request_id);
  w.Key("status");
  w.Int(status);
  w.Key("duration_ms");
  w.Double(std::chrono::duration<double, std::milli>(Clock::now() - call.started).count());
  w.Key("tries");
  w.Int(static_cast<int>(call.tried.size()));
  w.Key("fallback");
  w.Bool(call.fallback);
  w.Key("request_bytes");
  w.Uint64(call.request.body.size());
  w.Key("response_bytes");
  w.Uint64(response_bytes);
  w.EndObject();
  MutexLock l(&access_log_mu);
  std::fprintf(access_log, "%s\n", sb.GetString());
  std::fflush(access_log);
}

}  // namespace dais::gateway
