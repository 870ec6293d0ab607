// `dais ctl`: the cluster from the command line (docs/cluster.md): apply / delete deployments,
// get nodes, deployments, instances and assignments as tables or JSON, cordon / uncordon / drain
// nodes. Builds with gRPC only.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dais::cmd {

struct CtlOptions {
  std::vector<std::string> etcd = {"127.0.0.1:2379"};
  std::string file;  // apply -f
  std::string what;  // get <what> / delete deployment <name>
  std::string name;
  std::string output = "table";  // -o table|json
};

CLI::App* AddCtlCommand(CLI::App* app, CtlOptions* options);
int RunCtl(CLI::App* command, const CtlOptions& options);

}  // namespace dais::cmd
