// Tracing in the gateway (docs/operations.md, "Tracing"): the W3C trace context of a call, the
// headers that carry it to the node, and the span exported for a sampled call.
#include <chrono>

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

}  // namespace dais::gateway
