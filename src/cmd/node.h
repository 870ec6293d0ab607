// `dais node`: `dais serve` as a member of a cluster (cluster/node_agent.h): registers in etcd
// with its capacity, loads what the scheduler assigns, reports its instances. Every serve flag
// applies; model control is explicit (assignments drive the loads).
#pragma once

#include <string>
#include <vector>

#include "cmd/serve.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct NodeCliOptions {
  ServeOptions serve;
  std::vector<std::string> etcd;
  std::string gpus;
  std::string agent_gateway;       // the gateway of the agents this node runs (empty: from etcd)
  std::string agent_features_url;  // their feature server (empty: this node)
  std::string agent_token;         // their bearer token for the gateway
  std::string agent_tokens;        // a folder of tokens by tenant (DIR/<tenant>)
  std::string agent_txn_url;       // dais txn for their txn steps
  std::string labels;
  int lease_ttl_secs = 10;
  std::string advertise_host = "127.0.0.1";
};

CLI::App* AddNodeCommand(CLI::App* app, NodeCliOptions* options);
int RunNode(const NodeCliOptions& options);

}  // namespace dais::cmd
