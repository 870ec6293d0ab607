// gRPC to the nodes: one HTTP/2 connection per node address (nghttp2 as a client, prior
// knowledge, as gRPC speaks without TLS), every call one stream on it, unary and bidirectional
// alike. Messages pass as bytes: the gateway frames what it is given and hands back each message
// of the answer unframed, never decoding them. Asio and nghttp2 stay inside grpc_upstream.cc.
//
// With `on_callers_thread`, connections live on the io_context of the thread that starts the call
// when it is a listener's I/O thread (frontends::CurrentIoContext: the gateway's gRPC threads,
// one io_context each), else on the one given at construction: a call is read, forwarded and
// answered on one thread, with no wake-up of another in between. The owner of those threads
// calls CloseAll before they stop (after it, calls go on the given io_context only).
// `connections_per_node` connections per node address and per io_context (each on its own
// strand), chosen in turn per call.
// A connection is opened on first use (the address resolved asynchronously), kept while it
// works, and replaced on the next call after it broke or the node sent GOAWAY. Calls made while
// it connects wait for it. A call that never reached the node (no connection, or refused by the
// node's GOAWAY / REFUSED_STREAM) is reported `not_sent`: safe to try on another node.
//
// Threading: a connection's work runs on its own strand of the io_context; Start, Send,
// HalfClose and Cancel may be called from any thread; on_message and on_finish run on the
// strand, on_finish exactly once and last.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tls/context.h"

namespace boost::asio {
class io_context;
}

namespace dais::gateway {

struct GrpcResult {
  int code = 0;  // grpc-status; UNAVAILABLE (14) when the transport failed
  std::string message;
  bool not_sent = false;   // the node never saw the call
  bool timed_out = false;  // the deadline passed first (code DEADLINE_EXCEEDED)
  // Response metadata worth passing on (names lower-case; transport headers left out).
  std::vector<std::pair<std::string, std::string>> metadata;
};

struct GrpcCallOptions {
  std::string path;                                           // "/package.Service/Method"
  std::vector<std::pair<std::string, std::string>> metadata;  // custom request metadata
  // Also sent as grpc-timeout; the call ends DEADLINE_EXCEEDED (and is reset) when it passes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<void(std::string message)> on_message;
  std::function<void(GrpcResult result)> on_finish;
};

class GrpcUpstreamCall {
 public:
  virtual ~GrpcUpstreamCall() = default;
  // Queues one message for the node.
  virtual void Send(std::string message) = 0;
  // No more messages (END_STREAM after the queued ones).
  virtual void HalfClose() = 0;
  // Resets the stream; on_finish follows with CANCELLED unless it already ran.
  virtual void Cancel() = 0;
};

class GrpcUpstream {
 public:
  // `io` is borrowed and run by its owner's threads.
  // `tls_context`: gRPC over TLS to the nodes (ALPN h2; mutual TLS with a client certificate in
  // it); each node's certificate must carry `tls_name`, else the host of its address.
  explicit GrpcUpstream(boost::asio::io_context* io, uint32_t max_message_bytes = 64u << 20,
                        tls::SslCtxPtr tls_context = nullptr, std::string tls_name = "",
                        int connections_per_node = 1, bool on_callers_thread = true);
  ~GrpcUpstream();  // closes every connection; open calls end UNAVAILABLE
  GrpcUpstream(const GrpcUpstream&) = delete;
  GrpcUpstream& operator=(const GrpcUpstream&) = delete;

  // Starts a call to `address` ("host:port"). Send the request message(s), then HalfClose.
  std::shared_ptr<GrpcUpstreamCall> Start(const std::string& address, GrpcCallOptions call);
  // A unary call: Start, Send(`message`) and HalfClose in one step (its HEADERS and DATA leave in
  // one write).
  std::shared_ptr<GrpcUpstreamCall> StartUnary(const std::string& address, GrpcCallOptions call,
                                               std::string message);
  // Closes every connection (their open calls end UNAVAILABLE). For an owner about to stop the
  // threads of a listener whose calls opened connections on them (see above); calls started
  // afterwards open new ones, on the io_context given at construction.
  void CloseAll();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::gateway
