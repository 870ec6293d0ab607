#include "cmd/agent_orchestrator.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <map>

#include "agents/agent_spec.h"
#include "cluster/events.h"
#include "cluster/node_load.h"
#include "common/json.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "metrics/registry.h"

namespace dais::cmd {
namespace {

constexpr int64_t kStaleMs = 5000;  // a status older than this is no report

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Number(const rapidjson::Value& v, const char* key) {
  return v.HasMember(key) && v[key].IsNumber() ? v[key].GetDouble() : 0;
}

std::string Text(const rapidjson::Value& v, const char* key) {
  return v.HasMember(key) && v[key].IsString() ? v[key].GetString() : "";
}

// `rate`: runs a second for all the agent's runtimes together (each takes its share of those
// reporting, agent_live.cc).
std::string ControlJson(const agents::AgentControl& c, int64_t now_ms) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("state", rapidjson::Value(c.state.c_str(), a), a);
  d.AddMember("reason", rapidjson::Value(c.reason.c_str(), a), a);
  d.AddMember("time_ms", now_ms, a);
  if (c.rate > 0) d.AddMember("rate", c.rate, a);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  return sb.GetString();
}

}  // namespace

AgentOrchestratorLoop::AgentOrchestratorLoop(std::vector<std::string> etcd,
                                             std::string scheduler_id,
                                             std::function<int64_t()> leader_revision,
                                             agents::OrchestratorOptions options)
    : etcd_endpoints_(std::move(etcd)),
      id_(std::move(scheduler_id)),
      leader_revision_(std::move(leader_revision)),
      options_(options),
      policy_(std::make_unique<agents::Orchestrator>(options)) {}

AgentOrchestratorLoop::~AgentOrchestratorLoop() { Stop(); }

Status AgentOrchestratorLoop::Start() {
  ASSIGN_OR_RETURN(client_, etcd::Client::Create({etcd_endpoints_}));
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void AgentOrchestratorLoop::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void AgentOrchestratorLoop::Loop() {
  while (!stop_.load()) {
    const int64_t revision = leader_revision_();
    if (revision == 0) {
      policy_ = std::make_unique<agents::Orchestrator>(options_);  // a later leadership afresh
    } else {
      Tick(revision);
    }
    for (int i = 0; i < 5 && !stop_.load(); ++i) {  // four times a second
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void AgentOrchestratorLoop::Tick(int64_t revision) {
  auto specs = client_->Get(agents::kAgentsPrefix, true);
  if (!specs.ok() || specs->kvs.empty()) return;
  std::vector<agents::AgentSpec> agents;
  for (const auto& kv : specs->kvs) {
    if (auto a = agents::ParseAgentYaml(kv.value); a.ok()) agents.push_back(std::move(*a));
  }
  const int64_t now = NowMs();
  std::map<std::string, agents::AgentLoad> loads;
  if (auto st = client_->Get(agents::kAgentStatusPrefix, true); st.ok()) {
    for (const auto& kv : st->kvs) {
      const std::string rest = kv.key.substr(std::string(agents::kAgentStatusPrefix).size());
      rapidjson::Document d;
      if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
      if (now - static_cast<int64_t>(Number(d, "time_ms")) > kStaleMs) continue;
      const size_t slash = rest.find('/');
      agents::AgentLoad& l = loads[rest.substr(0, slash)];
      if (slash != std::string::npos) l.nodes.push_back(rest.substr(slash + 1));
      l.reporting = true;
      l.p99_ms = std::max(l.p99_ms, Number(d, "p99_ms"));
      l.window_runs += static_cast<int64_t>(Number(d, "window_runs"));
      l.backlog = std::max(l.backlog, static_cast<int64_t>(Number(d, "backlog")));
    }
  }
  std::map<std::string, agents::AgentControl> controls;
  if (auto c = client_->Get(agents::kAgentControlPrefix, true); c.ok()) {
    for (const auto& kv : c->kvs) {
      rapidjson::Document d;
      if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
      controls[kv.key.substr(std::string(agents::kAgentControlPrefix).size())] = {
          Text(d, "state"), Text(d, "reason"), Number(d, "rate")};
    }
  }
  // The nodes' live load (a report older than kStaleMs is none).
  std::map<std::string, agents::NodeLoad> nodes;
  if (auto n = client_->Get(cluster::kNodeLoadPrefix, true); n.ok()) {
    for (const auto& kv : n->kvs) {
      rapidjson::Document d;
      if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject() ||
          now - static_cast<int64_t>(Number(d, "time_ms")) > kStaleMs) {
        continue;
      }
      nodes[kv.key.substr(std::string(cluster::kNodeLoadPrefix).size())] = {Number(d, "cpu_busy")};
    }
  }
  // A control key left by an agent deleted since (re-applied, it would start paused).
  for (const auto& [name, control] : controls) {
    const bool known = std::any_of(agents.begin(), agents.end(),
                                   [&](const agents::AgentSpec& a) { return a.name == name; });
    if (!known) {
      using etcd::Compare;
      (void)client_->Txn(
          {{"/dais/scheduler/leader", Compare::Target::kCreateRevision, Compare::Op::kEqual,
            revision, ""}},
          {{etcd::Op::Kind::kDelete, agents::kAgentControlPrefix + name, "", 0, false}});
    }
  }
  static auto& decided = metrics::Registry::Global().AddCounter(
      "dais_agent_orchestrator_decisions_total",
      "Agents paused, throttled or resumed by the orchestrator (on the leading scheduler).",
      {"agent", "state"});
  for (const agents::Decision& d : policy_->Evaluate(now, agents, loads, controls, nodes)) {
    cluster::ClusterEvent ev{now,
                             d.control.state == "paused"      ? "agent-paused"
                             : d.control.state == "throttled" ? "agent-throttled"
                                                              : "agent-resumed",
                             "agent:" + d.agent,
                             "",
                             d.control.reason,
                             id_};
    std::vector<etcd::Op> ops = {{etcd::Op::Kind::kPut, agents::kAgentControlPrefix + d.agent,
                                  ControlJson(d.control, now), 0, false}};
    if (auto lease = client_->GrantLease(3600); lease.ok()) {
      ops.push_back({etcd::Op::Kind::kPut, cluster::kEventsPrefix + ev.Key(sequence_++),
                     ev.ToJson(), *lease, false});
    }
    using etcd::Compare;
    auto txn = client_->Txn({{"/dais/scheduler/leader", Compare::Target::kCreateRevision,
                              Compare::Op::kEqual, revision, ""}},
                            ops);
    if (!txn.ok() || !txn->succeeded) {
      LOG_WARNING("agents: {} not {} ({})", d.agent, d.control.state,
                  txn.ok() ? "not the leader any more" : txn.status().message());
      return;
    }
    decided.Get({d.agent, d.control.state}).Increment();
    LOG_INFO("agents: {} {}: {}", d.agent, d.control.state, d.control.reason);
  }
}

}  // namespace dais::cmd
