// `dais ctl`: the cluster from the command line (docs/cluster.md): apply / delete deployments,
// get nodes, deployments, instances, assignments and events as tables or JSON, watch the
// instances and events live, cordon / uncordon / drain nodes. Builds with gRPC only.
#pragma once

#include <string>
#include <vector>

#include "cmd/ctl_rollout.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct CtlOptions {
  std::vector<std::string> etcd = {"127.0.0.1:2379"};
  std::string file;  // apply -f
  std::string what;  // get <what> / delete deployment <name>
  std::string name;
  std::string output = "table";  // -o table|wide|json|yaml
  double watch_seconds = 0;      // watch --for; 0: until a signal
  RolloutCliOptions rollout;
};

CLI::App* AddCtlCommand(CLI::App* app, CtlOptions* options);
int RunCtl(CLI::App* command, const CtlOptions& options);

}  // namespace dais::cmd
