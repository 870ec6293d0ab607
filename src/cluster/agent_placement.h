// An agent (agents/agent_spec.h, 'kind: agent' at /dais/agents/<name>) as the scheduler places it:
// a one-replica deployment "agent:<name>" with the agent's resources, latency-sensitive for a
// high-priority agent (it may preempt best-effort work to find room), best-effort otherwise (a
// latency-sensitive deployment may preempt it). Its assignment carries the agent's spec as
// `agent`; the node runs `dais agent run` for it (cmd/agent_job.h). The scheduler reads only
// what placement needs here: the agent's steps are the runtime's business.
#pragma once

#include <string>

#include "cluster/deployment.h"
#include "dais/status.h"

namespace dais::cluster {

inline constexpr const char* kAgentsPrefix = "/dais/agents/";
inline constexpr const char* kAgentTaskPrefix = "agent:";
// Where a runtime serving an HTTP trigger can be called, under its lease (<agent>/<consumer>:
// {"http": "host:port", "tenant", "run_timeout_ms"}); the gateway forwards POST
// /v1/agents/<agent>/runs to one of them. Written once per lease (the live status beside it
// changes four times a second, which would rebuild the gateway's view as often).
inline constexpr const char* kAgentEndpointsPrefix = "/dais/agent-endpoints/";

// The deployment of a stored agent; InvalidArgument when its name or resources are unusable.
StatusOr<DeploymentSpec> AgentDeployment(const std::string& agent_json);

}  // namespace dais::cluster
