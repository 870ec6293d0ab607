// The inference feedback stream's seam (docs/streams.md): per answered inference, a record of
// what the model saw and said, offered to a sink that ships it off the request path (Redis
// Streams today: streams/redis_feedback.h; a Kafka sink would implement the same interface).
//
// Thread-safety: FeedbackSink::Offer is called from model instance threads, concurrently; it
// must not block (a full buffer drops the record and says so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/datatype.h"

namespace dais::runtime {
struct InferenceRequest;
struct InferenceResponse;
}  // namespace dais::runtime

namespace dais::server {

struct FeedbackTensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string bytes;       // the tensor's data, empty when truncated
  bool truncated = false;  // larger than kFeedbackMaxTensorBytes: shape only
};

inline constexpr size_t kFeedbackMaxTensorBytes = 64 * 1024;

struct FeedbackRecord {
  std::string id;        // the request's id ("" when the client gave none)
  std::string trace_id;  // its W3C trace ("" without a traceparent)
  std::string model, version;
  std::vector<std::string> entity_ids;  // an enriched request's entities
  // Every input the model ran on: the client's and, for an enriched request, the features the
  // feature store added.
  std::vector<FeedbackTensor> inputs, outputs;
  uint64_t latency_us = 0;  // arrival to answer, on the server
  int64_t time_ms = 0;      // wall clock at the answer, ms since the epoch
};

// The record of one answered inference (copies what it needs).
FeedbackRecord MakeFeedbackRecord(const runtime::InferenceRequest& request,
                                  const runtime::InferenceResponse& response, uint64_t now_ns);

class FeedbackSink {
 public:
  virtual ~FeedbackSink() = default;
  // Takes the record if there is room; false when it was dropped. Never blocks.
  virtual bool Offer(FeedbackRecord record) = 0;
};

}  // namespace dais::server
