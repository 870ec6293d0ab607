// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header that
// carries a trace across the gateway, the nodes and `dais txn` (docs/operations.md, "Tracing").
//   traceparent: 00-<trace-id: 32 hex>-<parent-id: 16 hex>-<flags: 2 hex>
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dais {

struct TraceContext {
  std::string trace_id;   // 32 lower-case hex digits, not all zero
  std::string parent_id;  // 16 lower-case hex digits, not all zero: the caller's span
  uint8_t flags = 0;      // bit 0: sampled

  bool sampled() const { return (flags & 1) != 0; }
  // The header value naming `span_id` as the parent (what a hop sends on).
  std::string Header(const std::string& span_id) const;
};

// The context of a traceparent value, or nullopt when it is not one (wrong length or
// characters, upper-case hex, an all-zero id, version ff). A version above 00 is read by its
// first four fields, as the specification asks, when what follows is '-'.
std::optional<TraceContext> ParseTraceparent(std::string_view header);

// Random ids (never all zero).
std::string NewTraceId();
std::string NewSpanId();

// A request id as a client sent it (x-request-id), kept when it is 1-128 printable ASCII
// characters without spaces; empty otherwise (the caller makes one).
std::string SaneRequestId(std::string_view header);

}  // namespace dais
