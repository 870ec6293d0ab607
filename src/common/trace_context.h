// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header that
// carries a trace across the gateway, the nodes and `dais txn` (docs/operations.md, "Tracing").
//   traceparent: 00-<trace-id: 32 hex>-<parent-id: 16 hex>-<flags: 2 hex>
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dais {

struct TraceContext {
  std::string trace_id;   // 32 lower-case hex digits, not all zero
  std::string parent_id;  // 16 lower-case hex digits, not all zero: the caller's span
  uint8_t flags = 0;      // bit 0: sampled

  bool sampled() const { return (flags & 1) != 0; }
  // The header value naming `span_id` as the parent (what a hop sends on).
  std::string Header(const std::string& span_id) const;
  // The same written into `out` (55 bytes for ids of the standard sizes): its length, or 0 when
  // it does not fit (nothing written).
  size_t HeaderTo(std::string_view span_id, char* out, size_t size) const;
};

// The context of a traceparent value, or nullopt when it is not one (wrong length or
// characters, upper-case hex, an all-zero id, version ff). A version above 00 is read by its
// first four fields, as the specification asks, when what follows is '-'.
std::optional<TraceContext> ParseTraceparent(std::string_view header);

// Random ids (never all zero).
std::string NewTraceId();
std::string NewSpanId();

// A server's side of one traced request: the caller's context continued (a valid traceparent
// keeps its trace id and sampled flag) or a new trace, sampled with probability `sample_rate`;
// a span id of its own; the request id (the client's when sane, else the trace id).
struct ServerTrace {
  TraceContext trace;  // parent_id: the caller's span (empty for a new trace)
  std::string span_id, request_id;
  int64_t start_unix_ns = 0;
  // The traceparent to send to the next hop (this span as its parent).
  std::string Outgoing() const { return trace.Header(span_id); }
};
ServerTrace BeginServerTrace(std::string_view traceparent, std::string_view request_id,
                             double sample_rate);

// One finished span, as the OTLP exporter sends it (gateway/otlp_exporter.h).
struct Span {
  std::string trace_id, span_id, parent_id;  // hex; parent empty for a root span
  std::string name;                          // "POST /v2/models/{route}/infer"
  int64_t start_unix_ns = 0, end_unix_ns = 0;
  bool error = false;  // a 5xx answer
  std::vector<std::pair<std::string, std::string>> string_attributes;
  std::vector<std::pair<std::string, int64_t>> int_attributes;
};

// A request id as a client sent it (x-request-id), kept when it is 1-128 printable ASCII
// characters without spaces; empty otherwise (the caller makes one).
std::string SaneRequestId(std::string_view header);

}  // namespace dais
