#include "cmd/ctl_agent.h"

#include <rapidjson/document.h>

#include "cluster/collection_placement.h"
#include "cmd/ctl_get.h"
#include "cmd/serve_features.h"
#include "common/json.h"
#include "fmt/format.h"
#include "gateway/route.h"
#include "redis/client.h"

namespace dais::cmd {
namespace {

std::string Member(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject() || !v.HasMember(key)) return "";
  const auto& f = v[key];
  if (f.IsString()) return f.GetString();
  if (f.IsInt64()) return std::to_string(f.GetInt64());
  return "";
}

}  // namespace

Status CheckAgentCapabilities(etcd::Client& c, const agents::AgentSpec& agent,
                              const std::set<std::string>& applying) {
  std::vector<std::string> missing;  // every problem, not only the first
  std::set<std::string> served;      // models some deployment serves
  if (!agent.capabilities.routes.empty()) {
    ASSIGN_OR_RETURN(etcd::RangeResult deployments, c.Get("/dais/deployments/", true));
    for (const auto& kv : deployments.kvs) {
      rapidjson::Document d;
      if (json::ParseJson(kv.value, &d).ok()) served.insert(Member(d, "model"));
    }
  }
  for (const std::string& route : agent.capabilities.routes) {
    const std::string key = gateway::kRoutesPrefix + route;
    if (applying.count(key)) continue;
    ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(key));
    if (r.kvs.empty()) {
      missing.push_back("capabilities.routes: route '" + route +
                        "' does not exist (dais ctl get routes)");
      continue;
    }
    rapidjson::Document d;
    const std::string model = json::ParseJson(r.kvs[0].value, &d).ok() ? Member(d, "model") : "";
    if (!served.count(model)) {
      missing.push_back("capabilities.routes: route '" + route + "' sends to model '" + model +
                        "', which no deployment serves (dais ctl get deployments)");
    }
  }
  for (const std::string& collection : agent.capabilities.collections) {
    const std::string key = cluster::kCollectionsPrefix + collection;
    if (applying.count(key)) continue;
    ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(key));
    if (r.kvs.empty()) {
      missing.push_back("capabilities.collections: collection '" + collection +
                        "' does not exist (dais ctl get collections)");
    }
  }
  if (missing.empty()) return OkStatus();
  std::string all;
  for (const std::string& m : missing) all += (all.empty() ? "" : "; ") + m;
  return FailedPrecondition(all);
}

int GetRuns(etcd::Client& c, const std::string& name, int count, bool json) {
  auto stored = c.Get(agents::kAgentsPrefix + name);
  if (!stored.ok() || stored->kvs.empty()) {
    fmt::print(stderr, "dais ctl get runs: no agent named '{}'{}\n", name,
               stored.ok() ? "" : ": " + stored.status().message());
    return 1;
  }
  auto agent = agents::ParseAgentYaml(stored->kvs[0].value);
  if (!agent.ok()) {
    fmt::print(stderr, "dais ctl get runs: agent {}: {}\n", name, agent.status().message());
    return 1;
  }
  FeatureFlags f;
  f.redis = agent->RedisAddress().empty() ? "127.0.0.1:6379" : agent->RedisAddress();
  auto redis = ConnectRedis(f);
  if (!redis.ok() || !(*redis)->WaitUntilReachable(std::chrono::seconds(5))) {
    fmt::print(stderr, "dais ctl get runs: redis {} is not reachable\n", f.redis);
    return 1;
  }
  const std::string stream = agent->RunsStream();
  auto r = (*redis)->Run({stream, {"XREVRANGE", stream, "+", "-", "COUNT", std::to_string(count)}});
  if (!r.ok() || r->is_error()) {
    fmt::print(stderr, "dais ctl get runs: {}\n", r.ok() ? r->str : r.status().message());
    return 1;
  }
  std::vector<std::vector<std::string>> rows = {
      {"RUN", "ATTEMPT", "OUTCOME", "DURATION_MS", "STEPS", "ERROR"}};
  for (const redis::Reply& e : r->elements) {
    std::string trace;
    for (size_t i = 0; e.elements.size() == 2 && i + 1 < e.elements[1].elements.size(); i += 2) {
      if (e.elements[1].elements[i].str == "trace") trace = e.elements[1].elements[i + 1].str;
    }
    if (json) {
      fmt::print("{}\n", trace);
      continue;
    }
    rapidjson::Document d;
    if (!json::ParseJson(trace, &d).ok() || !d.IsObject()) continue;
    std::string steps;
    if (d.HasMember("steps") && d["steps"].IsArray()) {
      for (const auto& s : d["steps"].GetArray()) {
        steps += (steps.empty() ? "" : " ") + Member(s, "name") + ":" + Member(s, "outcome");
      }
    }
    const double ms = d.HasMember("duration_us") && d["duration_us"].IsNumber()
                          ? d["duration_us"].GetDouble() / 1000
                          : 0;
    rows.push_back({Member(d, "run_id"), Member(d, "attempt"), Member(d, "outcome"),
                    fmt::format("{:.1f}", ms), steps, Member(d, "error")});
  }
  if (!json) PrintTable(rows);
  return 0;
}

}  // namespace dais::cmd
