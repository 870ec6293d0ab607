#include "cmd/listener_flags.h"

#include "common/logging.h"
#include "frontends/request_memory.h"

namespace dais::cmd {

void AddListenerLimitFlags(CLI::App* app, ListenerLimitFlags* f) {
  app->add_option("--http-max-connections", f->http_max_connections,
                  "Open HTTP connections admitted. At the limit a new connection closes, to make "
                  "room, the oldest silent one (no request yet), else the one idle the longest, "
                  "else the slowest one still receiving a request; when every connection is "
                  "serving a request the new one is closed at once (dais_listener_connections_*). "
                  "0: derived from the open-file limit (the rest after a reserve of max(256, "
                  "limit/8) descriptors, shared with gRPC).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--grpc-max-connections", f->grpc_max_connections,
                  "Open gRPC connections admitted; as --http-max-connections (a connection "
                  "without open calls is idle; one whose calls are all still receiving their "
                  "requests is receiving).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--max-connections-per-address", f->max_connections_per_address,
                  "Open connections admitted from one client address on each listener; more "
                  "are closed at accept (reason per_address). 0: no cap (behind a load balancer "
                  "every client has its address).")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--min-request-bytes-per-sec", f->min_request_bytes_per_sec,
                  "A request still arriving (an HTTP body after its head, a gRPC request "
                  "message) must average at least this many bytes a second after the grace "
                  "period, or it is closed (HTTP) / cancelled with RESOURCE_EXHAUSTED (gRPC) "
                  "and counted in dais_listener_slow_requests_total. 0: no minimum.")
      ->capture_default_str();
  app->add_option("--min-request-rate-grace-secs", f->min_request_rate_grace_secs,
                  "Seconds after a request's head before --min-request-bytes-per-sec applies.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--max-buffered-request-bytes", f->max_buffered_request_bytes,
                  "Bytes of requests still arriving that the process buffers, over all its "
                  "listeners; a request that does not fit is refused (HTTP 503 with "
                  "Retry-After, gRPC RESOURCE_EXHAUSTED) before more of it is read "
                  "(dais_request_buffered_bytes). 0: an eighth of physical memory.")
      ->capture_default_str();
}

void ApplyRequestMemoryLimit(const ListenerLimitFlags& f) {
  auto& memory = frontends::RequestMemory::Global();
  memory.set_limit(f.max_buffered_request_bytes > 0 ? f.max_buffered_request_bytes
                                                    : frontends::RequestMemory::DefaultLimit());
  LOG_INFO(
      "request limits: {} bytes of requests still arriving at most; at least {} bytes/s "
      "after {} s{}",
      memory.limit(), f.min_request_bytes_per_sec, f.min_request_rate_grace_secs,
      f.max_connections_per_address > 0
          ? "; " + std::to_string(f.max_connections_per_address) + " connections per address"
          : std::string());
}

void ApplyListenerLimits(const ListenerLimitFlags& f, int64_t flag_max, int64_t default_max,
                         frontends::EndpointOptions* o) {
  o->max_connections = flag_max > 0 ? flag_max : default_max;
  o->max_connections_per_address = f.max_connections_per_address;
  o->min_request_bytes_per_sec = f.min_request_bytes_per_sec;
  o->min_request_rate_grace_secs = f.min_request_rate_grace_secs;
}

}  // namespace dais::cmd
