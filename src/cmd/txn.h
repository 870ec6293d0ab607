// `dais txn`: the transaction coordinator (txn/coordinator.h, docs/transactions.md).
//   dais txn serve    --config txn.yaml ...   the coordinator's HTTP API, relays, resolver
//   dais txn recover  --config txn.yaml [--dry-run]   resolve what a crash left prepared
//   dais txn consume  --redis ... --feature-spec ...  the recent-items consumer on its own
// Builds with gRPC (the model gate) and Redis only.
#pragma once

#include <string>

#include "cmd/listener_flags.h"
#include "cmd/tls_flags.h"
#include "cmd/tracing_flags.h"

namespace dais::cmd {

struct TxnCliOptions {
  std::string config;
  std::string id = "txn-1";
  std::string http_address = "0.0.0.0";
  int http_port = 8090;
  int http_threads = 2;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8091;       // -1: no gRPC
  ListenerLimitFlags limits;  // connections and requests (listener_flags.h)
  int workers = 32;
  std::string gate_server = "127.0.0.1:8001";
  std::string redis;
  std::string feature_spec;
  int64_t events_max_len = 1000000;
  bool relay = true;
  int relay_poll_ms = 50;
  bool recent_items = false;
  std::string stream = "dais:purchases";
  std::string group = "recent-items";
  std::string consumer;
  std::string feature = "user_purchases:recent_items";
  std::string entity_field = "user_id";
  std::string item_field = "item_id";
  int claim_idle_ms = 30000;
  int resolve_interval_ms = 1000;
  bool dry_run = false;
  std::string crash_at;
  TracingFlags tracing;  // spans of the transactions (docs/operations.md, "Tracing")
  // TLS (docs/tls.md): its own ports, Redis, and the model server the gates call.
  ListenerTlsFlags http_tls, grpc_tls;
  TlsCommonFlags tls_common;
  tls::ClientConfig redis_tls;
  tls::ClientConfig gate_tls;
};

CLI::App* AddTxnCommand(CLI::App* app, TxnCliOptions* options);
int RunTxn(CLI::App* command, const TxnCliOptions& options);

}  // namespace dais::cmd
