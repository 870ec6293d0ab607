#include "cmd/agent_live.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <vector>

#include "agents/agent_spec.h"
#include "agents/template.h"
#include "common/json.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "metrics/registry.h"

namespace dais::cmd {
namespace {

constexpr int64_t kLeaseSecs = 5;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

AgentLive::AgentLive(std::string agent, std::string consumer, etcd::Client* etcd,
                     redis::Client* redis, std::string stream, std::string group,
                     std::chrono::milliseconds window)
    : agent_(std::move(agent)),
      consumer_(std::move(consumer)),
      stream_(std::move(stream)),
      group_(std::move(group)),
      window_length_(window),
      etcd_(etcd),
      redis_(redis) {}

AgentLive::~AgentLive() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void AgentLive::Start() {
  if (etcd_ != nullptr) thread_ = std::thread([this] { Loop(); });
}

void AgentLive::SetEndpoint(const std::string& http, const std::string& tenant,
                            int64_t run_timeout_ms, const std::string& key) {
  auto json = [](const std::string& s) {
    return agents::ValueJson(
        rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size())));
  };
  MutexLock l(&endpoint_mu_);
  endpoint_ = fmt::format(R"({{"http":{},"tenant":{},"run_timeout_ms":{},"key":{}}})", json(http),
                          json(tenant), run_timeout_ms, json(key));
}

void AgentLive::WithdrawEndpoint() {
  // Under the lock: the loop's Put of the endpoint cannot land after this Delete.
  MutexLock l(&endpoint_mu_);
  if (endpoint_.empty()) return;
  endpoint_.clear();
  if (etcd_ != nullptr) {
    (void)etcd_->Delete(std::string(cluster::kAgentEndpointsPrefix) + agent_ + "/" + consumer_);
  }
}

bool AgentLive::Admit() {
  if (paused_.load()) return false;
  MutexLock l(&mu_);
  if (rate_ <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  const double burst = std::max(1.0, rate_);
  tokens_ =
      std::min(burst, tokens_ + rate_ * std::chrono::duration<double>(now - refilled_).count());
  refilled_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void AgentLive::Refund() {
  MutexLock l(&mu_);
  if (rate_ > 0) tokens_ = std::min(std::max(1.0, rate_), tokens_ + 1);
}

void AgentLive::RecordRun(double latency_ms) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock l(&mu_);
  window_.emplace_back(now, latency_ms);
  while (!window_.empty() && window_.front().first < now - window_length_) window_.pop_front();
}

// The group's lag (entries not delivered yet) plus its pending entries (delivered, not done).
int64_t AgentLive::Backlog() {
  if (stream_.empty()) return 0;
  auto r = redis_->Run({stream_, {"XINFO", "GROUPS", stream_}}, std::chrono::seconds(1));
  if (!r.ok() || r->type != redis::Reply::Type::kArray) return -1;
  for (const redis::Reply& g : r->elements) {
    std::string name;
    int64_t lag = 0, pending = 0;
    for (size_t i = 0; i + 1 < g.elements.size(); i += 2) {
      const std::string& k = g.elements[i].str;
      const redis::Reply& v = g.elements[i + 1];
      if (k == "name") name = v.str;
      if (k == "lag" && v.type == redis::Reply::Type::kInteger) lag = v.integer;
      if (k == "pending" && v.type == redis::Reply::Type::kInteger) pending = v.integer;
    }
    if (name == group_) return lag + pending;
  }
  return -1;
}

// Reads the orchestrator's decision for this agent and follows it (paused; throttled: this
// runtime's share of the agent's rate).
void AgentLive::FollowControl(const std::string& control_key, metrics::Gauge& paused_gauge,
                              metrics::Gauge& rate_gauge) {
  if (auto c = etcd_->Get(control_key); c.ok()) {
    bool paused = false;
    double rate = 0;
    rapidjson::Document d;
    if (!c->kvs.empty() && json::ParseJson(c->kvs[0].value, &d).ok() && d.IsObject() &&
        d.HasMember("state") && d["state"].IsString()) {
      const std::string_view state = d["state"].GetString();
      paused = state == "paused";
      if (state == "throttled" && d.HasMember("rate") && d["rate"].IsNumber()) {
        // This runtime's share of the agent's rate: among the runtimes reporting now (their
        // number may have changed since the decision).
        int64_t runtimes = 1;
        if (auto st = etcd_->Get(std::string(agents::kAgentStatusPrefix) + agent_ + "/", true);
            st.ok() && !st->kvs.empty()) {
          runtimes = static_cast<int64_t>(st->kvs.size());
        }
        rate = std::max(0.001, d["rate"].GetDouble() / static_cast<double>(runtimes));
      }
    }
    bool changed = false;
    {
      MutexLock l(&mu_);
      changed = paused != paused_.load() || rate != rate_;
      if (rate != rate_) {
        rate_ = rate;
        tokens_ = std::min(tokens_, std::max(1.0, rate));
        refilled_ = std::chrono::steady_clock::now();
      }
    }
    if (changed) {
      LOG_INFO("agent {}: {} by the orchestrator{}", agent_,
               paused     ? "paused"
               : rate > 0 ? fmt::format("throttled to {:g} runs/s", rate)
                          : "running",
               d.IsObject() && d.HasMember("reason") && d["reason"].IsString()
                   ? std::string(": ") + d["reason"].GetString()
                   : "");
    }
    paused_ = paused;
    paused_gauge.Set(paused ? 1 : 0);
    rate_gauge.Set(rate);
  }
}

void AgentLive::Loop() {
  const std::string status_key = std::string(agents::kAgentStatusPrefix) + agent_ + "/" + consumer_;
  const std::string control_key = std::string(agents::kAgentControlPrefix) + agent_;
  const std::string endpoint_key =
      std::string(cluster::kAgentEndpointsPrefix) + agent_ + "/" + consumer_;
  int64_t lease = 0;
  metrics::Gauge& paused_gauge =
      metrics::Registry::Global()
          .AddGauge("dais_agent_paused",
                    "1 while the orchestrator has this agent paused (for a higher priority's SLA).",
                    {"agent"})
          .Get({agent_});
  metrics::Gauge& rate_gauge =
      metrics::Registry::Global()
          .AddGauge("dais_agent_throttle_runs_per_second",
                    "Runs a second this runtime may start while the orchestrator throttles the "
                    "agent (0: not throttled).",
                    {"agent"})
          .Get({agent_});
  auto kept_alive = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    FollowControl(control_key, paused_gauge, rate_gauge);
    // Report.
    std::vector<double> latencies;
    {
      MutexLock l(&mu_);
      const auto now = std::chrono::steady_clock::now();
      while (!window_.empty() && window_.front().first < now - window_length_) window_.pop_front();
      for (const auto& [t, ms] : window_) latencies.push_back(ms);
    }
    double p99 = 0;
    if (!latencies.empty()) {
      const size_t k = (latencies.size() * 99 + 99) / 100 - 1;
      std::nth_element(latencies.begin(), latencies.begin() + k, latencies.end());
      p99 = latencies[k];
    }
    const std::string status = fmt::format(
        R"({{"consumer":"{}","time_ms":{},"p99_ms":{:.3f},"window_runs":{},"backlog":{},)"
        R"("paused":{}}})",
        consumer_, NowMs(), p99, latencies.size(), Backlog(), paused_.load());
    const auto now = std::chrono::steady_clock::now();
    if (lease == 0) {
      if (auto l = etcd_->GrantLease(kLeaseSecs); l.ok()) lease = *l;
      kept_alive = now;
      MutexLock l(&endpoint_mu_);  // (held across the Put: see WithdrawEndpoint)
      if (lease != 0 && !endpoint_.empty() && !etcd_->Put(endpoint_key, endpoint_, lease).ok()) {
        lease = 0;  // (tried again with a new lease)
      }
    } else if (now - kept_alive >= std::chrono::seconds(1)) {  // (the lease lives 5 s)
      kept_alive = now;
      if (!etcd_->KeepAliveOnce(lease).ok()) lease = 0;
    }
    if (lease != 0 && !etcd_->Put(status_key, status, lease).ok()) lease = 0;
    // Four times a second: the orchestrator's decisions act within about half a second.
    for (int i = 0; i < 5 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (lease != 0) (void)etcd_->RevokeLease(lease);
}

}  // namespace dais::cmd
