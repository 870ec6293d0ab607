// One vector memory request through the gateway (memory_proxy.cc routes it here), over HTTP
// (JSON) or gRPC (dais.memory.v1, read and written at the wire level: proto_fields.h).
//   search / get: one READY replica per shard, grouped by node (one request per node naming its
//     shards: ?shards= or the message's `shards` field), the answers merged (search: the best
//     `k` by the collection's metric); a part whose node cannot be reached, fails mid-answer or
//     answers "unavailable" is sent to other replicas of the same shards.
//   upsert / delete: to one node holding any shard of the collection: it writes every point to
//     the shard's Redis hash and log, and each replica applies the log (about 100 ms later).
// Not a public header.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gateway/gateway_impl.h"

namespace dais::gateway {

struct MemoryFanOut {
  Gateway::Impl* g = nullptr;
  std::shared_ptr<const View> view;
  const cluster::CollectionPlacement* collection = nullptr;  // in `view`
  std::string op;                                            // upsert, delete, get or search
  std::string body;  // as the client sent it: JSON, or the protobuf message
  Clock::time_point deadline;
  int k = 10;
  bool write = false;  // upsert / delete
  // HTTP
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;
  frontends::http::Responder respond;
  // gRPC: set for a gRPC call
  std::shared_ptr<frontends::grpc::ServerCall> grpc;
  std::string method;
  std::vector<std::pair<std::string, std::string>> metadata;

  // A refusal: its HTTP status (also the metrics' code), the node's gRPC code when it came from
  // one (-1: from `status`), the message, and an HTTP node's body as it came.
  struct Failure {
    int status = 500;
    int grpc_code = -1;
    std::string message, body;
  };

  Mutex mu;
  int pending DAIS_GUARDED_BY(mu) = 0;
  std::set<std::string> failed DAIS_GUARDED_BY(mu);  // nodes that could not answer
  std::vector<std::pair<double, std::string>> hits DAIS_GUARDED_BY(mu);  // score, hit
  std::optional<Failure> error DAIS_GUARDED_BY(mu);
  std::optional<std::string> single DAIS_GUARDED_BY(mu);  // a write's answer, as it came
};

// Sends the parts; the answer goes to `respond` or `grpc`, the request counted in the metrics.
// The caller has counted the request in `g->in_flight` (Finish takes it off).
void StartFanOut(std::shared_ptr<MemoryFanOut> f);

// Answers a request that never reached a node (a refusal), counted under `collection`.
void RefuseMemory(const std::shared_ptr<MemoryFanOut>& f, int status, const std::string& message);

}  // namespace dais::gateway
