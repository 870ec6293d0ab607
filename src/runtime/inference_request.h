// The request and response that travel from a frontend through the batcher to a backend.
//
// Ownership: a frontend builds a RequestPtr and hands it to ModelManager::Infer, which moves it
// into the model version's queue. The ResponseCallback is called exactly once, on some runtime
// thread (never while a runtime lock is held); the frontend must hop back to its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"
#include "dais/tensor.h"

namespace dais::runtime {

struct RequestedOutput {
  std::string name;
  bool binary = false;  // binary tensor data extension: return raw bytes after the JSON header
};

struct InferenceResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;      // in the order of RequestedOutput (or the config's order)
  std::vector<bool> output_binary;  // parallel to outputs
  // Response "parameters" (string values), e.g. feature_status from feature enrichment.
  std::vector<std::pair<std::string, std::string>> parameters;
};
using ResponsePtr = std::unique_ptr<InferenceResponse>;
using ResponseCallback = std::function<void(StatusOr<ResponsePtr>)>;

struct InferenceRequest {
  std::string model_name;
  int64_t model_version = -1;  // -1: the version chosen by the version policy (the latest)
  std::string id;
  // The W3C trace this request belongs to (its traceparent's trace id; "" without one): carried
  // into the feedback record and the logs (docs/operations.md, "Tracing").
  std::string trace_id;
  std::string parent_span_id;  // the caller's span (the traceparent's parent id)
  bool trace_sampled = false;  // the traceparent's sampled flag: the node exports its span
  std::vector<Tensor> inputs;
  // Entity ids for a model that declares features (parameters.entity_ids); see features.yaml.
  std::vector<std::string> entity_ids;
  // Copied into the response's parameters.
  std::vector<std::pair<std::string, std::string>> response_parameters;
  std::vector<RequestedOutput> outputs;  // empty: every output of the model
  bool binary_output_default = false;    // parameters.binary_data_output
  uint64_t timeout_us = 0;               // 0: the queue policy's default
  uint32_t priority = 0;                 // 0: the model's default priority level
  std::string body;                      // owns the bytes that `inputs` may borrow
  ResponseCallback on_complete;
  // Set by the frontend when the client gave up (gRPC cancellation): a request still queued is
  // then answered Cancelled instead of being executed. May be null.
  std::shared_ptr<std::atomic<bool>> cancelled;
  // Set by a frontend whose thread may run the model and take the answer itself (on_complete
  // called before Enqueue returns): an I/O thread holding no lock that on_complete takes. At light
  // load a batch then runs on the thread that received it, with no hand-off or wake-up
  // (docs/batching.md, "Inline execution").
  bool may_run_inline = false;
  // Filled by the runtime.
  uint64_t arrival_ns = 0;
  uint64_t enqueue_ns = 0;
  uint64_t deadline_ns = 0;  // 0: none
  int64_t batch_size = 1;    // first dimension when the model batches, else 1
};
using RequestPtr = std::unique_ptr<InferenceRequest>;

}  // namespace dais::runtime
