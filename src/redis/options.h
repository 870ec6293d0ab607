// Client configuration and seed parsing. Included by client.h.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "tls/config.h"
#include "tls/context.h"

namespace dais::redis {

struct ClientOptions {
  // "host:port" ("[v6]:port" for IPv6). One seed: a standalone server or any cluster node; the
  // mode is detected. Several seeds: cluster nodes (the first that answers is used).
  std::vector<std::string> seeds;
  // Connections per node; requests are spread round-robin and pipelined on each.
  int connections_per_node = 2;
  // TCP connect plus handshake (AUTH, PING).
  std::chrono::milliseconds connect_timeout{500};
  // Default for Run/RunBatch/RunEval/RunOn when their timeout is 0.
  std::chrono::milliseconds command_timeout{200};
  // AUTH on connect when password is non-empty (AUTH username password when username is too).
  std::string username, password;
  std::chrono::milliseconds slot_refresh_interval{10000};
  std::chrono::milliseconds health_check_interval{1000};
  int max_redirections = 5;

  // Additions beyond the original contract:
  // Reconnect backoff: doubles from min to max after each failed attempt (±20% jitter).
  std::chrono::milliseconds reconnect_backoff_min{50};
  std::chrono::milliseconds reconnect_backoff_max{2000};
  // A connection whose oldest request is this far past its deadline is dropped and reconnected
  // (its other requests fail with Unavailable).
  std::chrono::milliseconds stuck_connection_timeout{2000};
  // TLS on every connection (pipelined and pub/sub): rediss:// seeds or the --redis-tls flags.
  // The server certificate is checked against tls.server_name, else the seed's host.
  tls::ClientConfig tls;
  tls::SslCtxPtr tls_context;  // made from `tls` by PrepareTls (Client::Create does it)
};

// Splits "host:port,host:port" (spaces around entries ignored) into ClientOptions::seeds, other
// fields default. InvalidArgument naming the bad entry for an empty list, an empty entry, a
// missing host or a port outside 1..65535.
// Entries may be written redis://host:port or rediss://host:port (TLS: sets tls.enabled).
StatusOr<ClientOptions> ParseSeeds(std::string_view comma_list);

// Makes tls_context from tls when TLS is asked for and it is not made yet. InvalidArgument
// naming a bad CA / certificate / key file.
Status PrepareTls(ClientOptions* options);

// "host:port" → host, port. InvalidArgument naming `address` when malformed.
Status SplitHostPort(std::string_view address, std::string* host, uint16_t* port);

// InvalidArgument for malformed options (no seeds, bad seed, non-positive sizes or durations).
Status ValidateOptions(const ClientOptions& options);

}  // namespace dais::redis
