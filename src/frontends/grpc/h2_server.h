// The gRPC listener: accepts TCP connections (HTTP/2 with prior knowledge, as gRPC clients
// speak it without TLS) and drives one H2Connection per connection on a pool of Asio I/O
// threads, the way http_server.h does for HTTP/1.1. Server keepalive PINGs, graceful GOAWAY on
// Stop. Asio stays inside h2_server.cc.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dais/status.h"
#include "frontends/endpoint.h"
#include "frontends/grpc/h2_connection.h"

namespace dais::frontends::grpc {

// Open connections (max_connections): a connection without open calls is idle.
struct H2ServerOptions : EndpointOptions {
  H2Options h2;
  // Keepalive: a PING after this long without one (while calls are open, or always when
  // permit_without_calls); the connection is closed when it is not answered within the timeout.
  int keepalive_time_ms = 7200000;
  int keepalive_timeout_ms = 20000;
  bool keepalive_permit_without_calls = false;
  // At most this many PINGs without DATA sent in between (0: no limit).
  int max_pings_without_data = 2;
  // Called by Stop once the connections are closed, before the I/O threads are joined: a
  // component that opened connections of its own on these threads (the gateway's to the nodes)
  // closes them here, else the threads would not run out of work.
  std::function<void()> before_join;
};

// A gRPC server on a frontends::Listener: each call goes to its method in the table.
class H2Server {
 public:
  H2Server(H2ServerOptions options, MethodTable methods);
  ~H2Server();
  // Binds and starts the I/O threads. Unavailable if the port cannot be bound.
  Status Start();
  int port() const { return port_; }
  // Stops accepting, sends GOAWAY on every connection, waits up to `deadline_ms` for open
  // calls to finish, then closes what is left (its calls are cancelled) and joins the threads.
  void Stop(int deadline_ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace dais::frontends::grpc
