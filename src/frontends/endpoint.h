// What every dais listener is configured with (HTTP, metrics, gRPC); each server's options add
// their own protocol settings to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tls/context.h"

namespace dais::frontends {

struct EndpointOptions {
  std::string address = "0.0.0.0";
  int port = 0;     // 0: pick a free port
  int threads = 0;  // I/O threads; 0: one per core
  // Open connections admitted (connection_limit.h: at the limit the longest-idle one is closed
  // to make room, or the new one refused).
  int64_t max_connections = 1024;
  // Open connections from one client address (0: no cap). Off by default: behind a load balancer
  // or a NAT every client shares one address. Past it a new connection is closed at once
  // (dais_listener_connections_refused_total{reason="per_address"}).
  int64_t max_connections_per_address = 0;
  // A request still arriving (an HTTP body after its head, a gRPC request message after its
  // HEADERS) must average at least this many bytes a second once `min_request_rate_grace_secs`
  // have passed since its head, or it is closed (HTTP) / cancelled (gRPC) and counted
  // (dais_listener_slow_requests_total). 0: no minimum. A request that is still arriving can be
  // closed to make room for a new connection at the limit, the slowest first (connection_limit.h).
  uint64_t min_request_bytes_per_sec = 1024;
  int min_request_rate_grace_secs = 10;
  // After each piece of work an I/O thread keeps polling its sockets (epoll without a wait) this
  // long before it blocks (0: blocks at once). At light load the next request then finds the
  // thread running instead of asleep: no wake-up, which on a virtual machine whose idle vCPU
  // halts costs tens of microseconds; the price is a core spinning while connections are idle
  // for up to that long after each request (docs/batching.md, "Busy polling").
  uint32_t busy_poll_us = 0;
  // Binds I/O thread i to the i-th core the process may run on (modulo their number), as
  // nginx's `worker_cpu_affinity auto`. Two listeners' threads i share core i, and a thread an
  // I/O thread starts inherits the binding. For a machine given to dais (docs/memory.md,
  // "Threads": no consistent effect measured on 2 shared cores).
  bool cpu_affinity = false;
  // TLS on this listener (null: plain text). Shared: the process reloads it (tls/reloader.h).
  std::shared_ptr<tls::ServerContext> tls;
};

}  // namespace dais::frontends
