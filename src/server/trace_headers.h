// What a node takes from a request's headers (HTTP) or metadata (gRPC) for tracing
// (docs/operations.md, "Tracing"): the W3C traceparent's trace id, and x-request-id as the
// request's id when the body named none, so that a gateway's request id reaches the feedback
// record and the labels that join it.
#pragma once

#include <string_view>

#include "common/trace_context.h"
#include "runtime/inference_request.h"

namespace dais::server {

template <typename HeaderFn>  // std::string_view(std::string_view lower_case_name)
void ApplyTraceHeaders(const HeaderFn& header, runtime::InferenceRequest* r) {
  if (auto t = ParseTraceparent(header("traceparent"))) {
    r->trace_id = std::move(t->trace_id);
    r->parent_span_id = std::move(t->parent_id);
    r->trace_sampled = t->sampled();
  }
  if (r->id.empty()) r->id = SaneRequestId(header("x-request-id"));
}

}  // namespace dais::server
