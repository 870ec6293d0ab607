// KServe v2 gRPC frontend (inference.GRPCInferenceService, wire-compatible with Triton's) and the
// standard grpc.health.v1.Health service, on dais's own gRPC transport (h2_server.h): no thread
// is held per outstanding request; an inference is decoded on an I/O thread, runs on the
// model's instance thread, and is answered from there, or from an I/O thread when one is busy.
#pragma once

#include <memory>
#include <string>

#include "dais/status.h"
#include "frontends/endpoint.h"
#include "frontends/grpc/h2_server.h"
#include "memory/memory_service.h"
#include "server/api_restrictions.h"
#include "server/inference_server.h"
#include "server/labels.h"

namespace dais::frontends::grpc {

struct GrpcOptions : EndpointOptions {
  GrpcOptions() { port = 8001; }  // Triton's gRPC port
  int max_message_bytes = 64 << 20;
  int keepalive_time_ms = 7200000;  // gRPC's default: 2 hours
  int keepalive_timeout_ms = 20000;
  bool keepalive_permit_without_calls = false;
  int http2_max_pings_without_data = 2;
  // --grpc-restricted-protocol: groups of methods that need a metadata entry; a call without it
  // ends with UNAVAILABLE, as Triton's does.
  server::ApiRestrictions restrictions;
  // --label-stream: /dais.labels.v1.Labels/Post stores into it (borrowed; null: NOT_FOUND).
  server::LabelSink* labels = nullptr;
  // --memory: /dais.memory.v1.Memory/* over it (borrowed; null: those methods are unknown).
  memory::MemoryService* memory = nullptr;
};

class GrpcFrontend {
 public:
  // `server` is borrowed and must outlive this object.
  GrpcFrontend(GrpcOptions options, server::InferenceServer* server);
  ~GrpcFrontend();
  // Binds and starts serving. Unavailable if the port cannot be bound.
  Status Start();
  int port() const { return port_; }
  // Health service says NOT_SERVING (on SIGTERM).
  void SetNotServing();
  // Shuts the server down (calls still running after `deadline_ms` are cancelled). Join the
  // server's repository threads first (InferenceServer::JoinBackground): they answer calls.
  void Stop(int deadline_ms);

  class Service;

 private:
  GrpcOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<H2Server> server_;
  int port_ = 0;
};

}  // namespace dais::frontends::grpc
