// `dais ctl rollout start | status` and `dais ctl rollback` (gateway/rollout.h,
// docs/gateway.md "Rollouts").
#pragma once

#include <string>
#include <vector>

#include "etcd/client.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct RolloutCliOptions {
  std::string route;
  int64_t to = 0;
  std::vector<int> steps = {5, 25, 50, 100};
  std::string interval = "30s";
  std::string max_error_rate = "1%";
  double max_p99_ms = 0;
  int64_t min_requests = 20;
  double max_psi = 0;
  std::string accuracy_label;  // empty: live accuracy not compared
  double min_accuracy_delta = 0;
  std::string output = "table";  // rollout status -o
  bool watch = false;            // rollout status --watch
};

// An operator's decision on ROUTE's rollout, as `dais ctl` and the console make it: "rollback"
// (all traffic back to the stable version, the rollout aborted; with no rollout in progress, the
// route's stable version takes all), "pause" (the weight stays, no analysis), "resume" (the
// current step's interval anew) or "promote" (all traffic to the canary now). `who` is written in
// the rollout's history ("paused by dais ctl"). The sentence saying what happened, or NotFound
// (no route / rollout), FailedPrecondition (not in a state for it), InvalidArgument (the verb).
StatusOr<std::string> DecideRollout(etcd::Client& c, const std::string& route,
                                    const std::string& verb, const std::string& who);

// Adds `rollout` (start, status) and `rollback` under `ctl`.
void AddRolloutCommands(CLI::App* ctl, RolloutCliOptions* options);
// -1 when neither command was given.
int RunRolloutCommands(CLI::App* ctl, etcd::Client& client, const RolloutCliOptions& options);

}  // namespace dais::cmd
