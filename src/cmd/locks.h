// `dais locks list|inspect|break`: operator tools for the lock service (src/locks).
#pragma once

#include <string>

#include "cmd/serve_features.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct LocksCliOptions {
  FeatureFlags store;  // the Redis connection flags
  std::string model = "*";
  std::string level;  // break: model | version | node
  std::string version, node;
  bool force = false;
  bool all = false;
};

CLI::App* AddLocksCommand(CLI::App* app, LocksCliOptions* options);
int RunLocks(CLI::App* locks_cmd, const LocksCliOptions& options);

}  // namespace dais::cmd
