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
  // TLS on this listener (null: plain text). Shared: the process reloads it (tls/reloader.h).
  std::shared_ptr<tls::ServerContext> tls;
};

}  // namespace dais::frontends
