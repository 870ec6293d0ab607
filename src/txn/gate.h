// The model gate of a transaction's prepare phase: builds the model's input vector from the
// request's parameters and the feature store (one lookup of the entity's record), calls
// `dais serve` (or any KServe v2 / Triton gRPC server) with ModelInfer under the gate's deadline,
// and compares the score with the threshold. Runs beside the branches; never waits past its
// timeout.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "features/spec/feature_spec.h"
#include "txn/txn_spec.h"

namespace grpc {
class ChannelCredentials;
}

namespace dais::features {
class FeatureStore;
}

namespace dais::txn {

// A call's W3C traceparent and x-request-id (HTTP headers or gRPC metadata): as a caller sent
// them to `dais txn` (either may be empty or malformed), or as the gate sends them on.
struct CallTrace {
  std::string traceparent, request_id;
};

struct GateResult {
  enum Kind { kPass, kRefuse, kError };
  Kind kind = kError;
  double score = 0;
  std::string message;  // why (refusal: the score and threshold; error: what failed)
};

class Gate {
 public:
  // `server`: host:port of the model server's gRPC port. `store` and `spec` (may be null when no
  // gate uses features) are borrowed.
  // `credentials`: grpc++'s channel credentials for `server` (null: plain text).
  Gate(const std::string& server, features::FeatureStore* store, features::FeatureSpecPtr spec,
       std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  ~Gate();
  // Checks that every gate's features resolve in the feature spec. InvalidArgument naming them.
  Status Validate(const TxnSpec& spec) const;
  // Connects the channel to the model server (so that the first transaction does not pay for
  // it); false when it did not connect within `timeout_ms` (calls will keep trying).
  bool Connect(int timeout_ms);
  // Scores asynchronously; `done` runs exactly once, on a feature-store or gRPC thread. `trace`
  // goes to the model server as traceparent / x-request-id metadata.
  void Score(const GateSpec& gate, const Params& params, CallTrace trace,
             std::function<void(GateResult)> done);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::txn
