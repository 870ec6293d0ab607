// `dais agent run`: the runtime of one agent (docs/agents.md). It reads the agent's spec (from
// etcd by name, or a file), consumes its trigger stream with a consumer group (at least once:
// an entry is acknowledged after its run; a run that failed is retried after --retry-after-ms,
// up to max_attempts, then dead-lettered), runs the steps through the gateway, the feature
// server and Redis, records every run in the agent's runs stream and exposes metrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tls/config.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct AgentCliOptions {
  std::vector<std::string> etcd = {"127.0.0.1:2379"};
  std::string name;          // the spec at /dais/agents/<name>
  std::string file;          // or a spec file (no etcd)
  std::string gateway;       // default: a gateway registered in etcd
  std::string features_url;  // default: --gateway
  std::string token;         // bearer token for the gateway
  std::string txn_url;       // dais txn, for txn steps
  std::string consumer;      // default: the host name
  int workers = 0;           // 0: the spec's concurrency
  int retry_after_ms = 5000;
  int64_t emit_max_len = 1000000;
  int64_t runs_max_len = 10000;
  int emitted_ttl_secs = 7 * 86400;
  bool drain = false;
  int http_queue = 64;  // HTTP triggers waiting for a worker before 503
  int metrics_port = -1;
  std::string metrics_address = "127.0.0.1";
  std::string advertise_host;  // the HTTP trigger's published host (default: metrics_address)
  std::string trigger_key;     // the HTTP trigger's x-dais-agent-key (default: random with etcd)
  tls::ClientConfig redis_tls;
};

CLI::App* AddAgentCommand(CLI::App* app, AgentCliOptions* options);
int RunAgentCommand(const AgentCliOptions& options);

}  // namespace dais::cmd
