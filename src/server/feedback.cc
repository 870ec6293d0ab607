#include "server/feedback.h"

#include <chrono>

#include "runtime/inference_request.h"

namespace dais::server {
namespace {

FeedbackTensor Copy(const Tensor& t) {
  FeedbackTensor f;
  f.name = t.name;
  f.dtype = t.dtype;
  f.shape = t.shape;
  if (t.data.size() <= kFeedbackMaxTensorBytes) {
    f.bytes.assign(t.data.data(), t.data.size());
  } else {
    f.truncated = true;
  }
  return f;
}

}  // namespace

FeedbackRecord MakeFeedbackRecord(const runtime::InferenceRequest& request,
                                  const runtime::InferenceResponse& response, uint64_t now_ns) {
  FeedbackRecord r;
  r.id = request.id;
  r.trace_id = request.trace_id;
  r.model = response.model_name;
  r.version = response.model_version;
  r.entity_ids = request.entity_ids;
  for (const Tensor& t : request.inputs) r.inputs.push_back(Copy(t));
  for (const Tensor& t : response.outputs) r.outputs.push_back(Copy(t));
  r.latency_us = now_ns > request.arrival_ns ? (now_ns - request.arrival_ns) / 1000 : 0;
  r.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  return r;
}

}  // namespace dais::server
