// `dais ctl` for agents (docs/agents.md): what an applied agent needs checked against the
// cluster, and `dais ctl get runs AGENT` (the runs its runtime recorded in Redis).
#pragma once

#include <set>
#include <string>

#include "agents/agent_spec.h"
#include "dais/status.h"
#include "etcd/client.h"

namespace dais::cmd {

// Every route the agent names exists and its model is served by a deployment, every collection
// exists (in etcd, or among `applying`: the keys of the same apply). FailedPrecondition naming
// everything missing.
Status CheckAgentCapabilities(etcd::Client& c, const agents::AgentSpec& agent,
                              const std::set<std::string>& applying);

// The last `count` runs of `agent`, newest first, as a table (or JSON lines with `json`).
int GetRuns(etcd::Client& c, const std::string& agent, int count, bool json);

}  // namespace dais::cmd
