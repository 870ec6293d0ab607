// The seam between the load loop and a protocol. Two implementations: HTTP (Boost.Beast,
// http_client.cc) and gRPC (grpc_client.cc: inference on dais perf's own HTTP/2 connection, or
// on the generated sync stub); tests may fake it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"
#include "perf/model_info.h"
#include "perf/stats.h"
#include "tls/config.h"
#include "tls/context.h"

namespace dais::perf {

// One connection (or one gRPC stub on a shared channel) with its pre-built requests.
// Infer is called by one thread at a time; Abort from any thread.
class InferSession {
 public:
  virtual ~InferSession() = default;
  // Sends the next pre-built request (round-robin over the session's requests) and reads the
  // whole response. OK only for a successful answer; an HTTP status other than 200 or a gRPC
  // status other than OK becomes an error carrying the server's message. A broken connection
  // is reopened by the next call.
  virtual Status Infer() = 0;
  // Sessions whose connection carries several requests at once (gRPC: HTTP/2 streams) say how
  // many; the load loop may then give one session several in-flight slots and call RunSlots.
  virtual int MaxInFlight() const { return 1; }
  // Keeps `slots` requests in flight until stop() is true, then waits for the open ones;
  // done(start_ns, end_ns, status) for each (steady clock). A non-OK return is a broken
  // connection (its open requests were reported failed); the next call reconnects.
  using RequestDone = std::function<void(int64_t start_ns, int64_t end_ns, const Status& status)>;
  virtual Status RunSlots(int slots, const std::function<bool()>& stop, const RequestDone& done) {
    return Unimplemented("this protocol sends one request at a time per connection");
  }
  // Makes a pending Infer return promptly with an error, and every later one return Cancelled:
  // the session is finished (used to stop threads blocked on a server that does not answer).
  virtual void Abort() = 0;
};

// Control calls (metadata, statistics) are made by one thread at a time; NewSession from that
// thread too. The client outlives its sessions.
class Client {
 public:
  virtual ~Client() = default;
  // Model metadata plus max_batch_size from the configuration (-1 if the server has no
  // configuration endpoint). Unavailable if the server cannot be reached, NotFound (with the
  // server's message) for an unknown model or version.
  virtual StatusOr<ModelInfo> GetModelInfo() = 0;
  // The model's statistics (summed over the versions in the answer). Unimplemented when the
  // server has no statistics endpoint.
  virtual StatusOr<ServerStats> GetStats() = 0;
  // A new session sending `requests` in turn (at least one). Does not connect yet.
  virtual StatusOr<std::unique_ptr<InferSession>> NewSession(
      const std::vector<RequestInputs>& requests) = 0;
  // "http (JSON) 127.0.0.1:8000"
  virtual std::string Describe() const = 0;
};

struct ClientOptions {
  std::string protocol = "http";  // http | grpc
  std::string host;
  std::string port;
  std::string model_name;
  std::string model_version;  // empty: the server's choice
  bool http_binary = false;
  // gRPC inference calls through grpc++'s generated synchronous stub instead of dais perf's own
  // HTTP/2 connection (grpc_h2.h).
  bool grpc_stub = false;
  // TLS (HTTPS / gRPC over TLS): the server is verified against tls.ca_file and the host name.
  tls::ClientConfig tls;
  tls::SslCtxPtr tls_context;  // made by MakeClient from `tls` when TLS is on
};

// Unimplemented for grpc when dais was built without gRPC; Unavailable if the host does not
// resolve.
StatusOr<std::unique_ptr<Client>> MakeClient(const ClientOptions& options);

}  // namespace dais::perf
