// Connection and request limits shared by every role with client-facing listeners (dais serve,
// node, gateway, txn serve): issue 32 found the gateway and txn with a fixed cap of 1,024
// connections and no flag, and no role with a minimum request rate or a bound on the bytes of
// requests still arriving. docs/http-api.md ("Connection limits") explains the policy.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "frontends/connection_limit.h"
#include "frontends/endpoint.h"

namespace dais::cmd {

struct ListenerLimitFlags {
  int64_t http_max_connections = 0;  // 0: from the open-file limit
  int64_t grpc_max_connections = 0;
  int64_t max_connections_per_address = 0;
  uint64_t min_request_bytes_per_sec = 1024;
  int min_request_rate_grace_secs = 10;
  uint64_t max_buffered_request_bytes = 0;  // 0: RequestMemory::DefaultLimit()
};

// --http-max-connections, --grpc-max-connections, --max-connections-per-address,
// --min-request-bytes-per-sec, --min-request-rate-grace-secs, --max-buffered-request-bytes.
void AddListenerLimitFlags(CLI::App* app, ListenerLimitFlags* flags);

// Sets the process's budget for buffered request bytes (call once, before the listeners start).
void ApplyRequestMemoryLimit(const ListenerLimitFlags& flags);

// The limits of one listener: `max_connections` from the flag, else `default_max`.
void ApplyListenerLimits(const ListenerLimitFlags& flags, int64_t flag_max, int64_t default_max,
                         frontends::EndpointOptions* options);

}  // namespace dais::cmd
