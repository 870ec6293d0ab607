#include "cluster/agent_placement.h"

#include <rapidjson/document.h>

#include "common/json.h"

namespace dais::cluster {

StatusOr<DeploymentSpec> AgentDeployment(const std::string& agent_json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(agent_json, &d));
  if (!d.IsObject() || !d.HasMember("name") || !d["name"].IsString() ||
      d["name"].GetStringLength() == 0) {
    return InvalidArgument("agent: no name");
  }
  DeploymentSpec s;
  s.name = kAgentTaskPrefix + std::string(d["name"].GetString());
  s.model = s.name;
  s.replicas = 1;
  s.cpu_milli = 250;
  s.memory_mib = 128;
  if (d.HasMember("resources") && d["resources"].IsObject()) {
    const auto& r = d["resources"];
    if (r.HasMember("cpu_milli") && r["cpu_milli"].IsInt64())
      s.cpu_milli = r["cpu_milli"].GetInt64();
    if (r.HasMember("memory_mib") && r["memory_mib"].IsInt64()) {
      s.memory_mib = r["memory_mib"].GetInt64();
    }
  }
  if (s.cpu_milli < 0 || s.memory_mib < 0) return InvalidArgument("agent: negative resources");
  const bool high = d.HasMember("priority") && d["priority"].IsString() &&
                    std::string_view(d["priority"].GetString()) == "high";
  s.priority = high ? "latency-sensitive" : "best-effort";
  s.may_preempt = high;
  return s;
}

}  // namespace dais::cluster
