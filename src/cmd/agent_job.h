// An agent's runtime on the node the scheduler chose (cluster/agent_placement.h): the node runs
// `dais agent run --name <agent> --consumer <node>` as a child process, starts it again when it
// exits (after 1 s, doubling to 30 s while it keeps failing within a minute), and stops it when
// the assignment goes (SIGTERM; SIGKILL after 10 s). The child dies with the node
// (PR_SET_PDEATHSIG); its log lines go to the node's log. RUNNING with "pid N" while it runs; the
// exits are in the reason.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/assigned_job.h"

namespace dais::cmd {

struct AgentJobOptions {
  std::string node_id;
  std::vector<std::string> etcd_endpoints;
  std::string dais_binary;
  std::string gateway;       // --agent-gateway; empty: the runtime finds one in etcd
  std::string features_url;  // --agent-features-url; default: the node itself
  std::string token;         // --agent-token: the gateway's bearer token for them
  std::string tokens_dir;    // --agent-tokens: DIR/<tenant> holds the token of a tenant's agents
  std::string txn_url;       // --agent-txn-url: dais txn for their txn steps
  std::string host;          // the node's --advertise-host: where their HTTP triggers listen
};

StatusOr<std::unique_ptr<cluster::AssignedJob>> StartAgentJob(const AgentJobOptions& options,
                                                              const cluster::Assignment& a,
                                                              std::function<void()> changed);

}  // namespace dais::cmd
