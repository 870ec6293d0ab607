// The agent runtime's link to the orchestrator (agents/orchestrator.h): four times a second it
// publishes
// its live state (the window p99 of its runs' latency, their count, the trigger's backlog) under
// /dais/agent-status/<agent>/<consumer> with a lease, and reads /dais/agent-control/<agent>:
// while it says "paused", the workers take no new trigger; while it says "throttled", they start
// at most their share of the agent's rate (divided among the runtimes reporting; a token bucket
// holding one second's worth).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "etcd/client.h"
#include "metrics/registry.h"
#include "redis/client.h"

namespace dais::cmd {

class AgentLive {
 public:
  // `etcd` null: no orchestrator (a spec file run alone); never paused. `stream` empty: a timer.
  AgentLive(std::string agent, std::string consumer, etcd::Client* etcd, redis::Client* redis,
            std::string stream, std::string group, std::chrono::milliseconds window);
  ~AgentLive();
  void Start();
  // Before Start: also publish where this runtime's HTTP trigger listens (kAgentEndpointsPrefix).
  void SetEndpoint(const std::string& http, const std::string& tenant, int64_t run_timeout_ms,
                   const std::string& key);
  // Removes the endpoint from etcd (before the trigger stops answering); no more published.
  void WithdrawEndpoint();
  // A run ended `latency_ms` after its trigger was published.
  void RecordRun(double latency_ms);
  bool paused() const { return paused_.load(); }
  // Takes the right to start one run now: false while paused, or throttled and this second's
  // runs are spent.
  bool Admit();
  // Gives back a leave taken for a run that was not made (nothing to read, a refused call).
  void Refund();

 private:
  void Loop();
  void FollowControl(const std::string& control_key, metrics::Gauge& paused_gauge,
                     metrics::Gauge& rate_gauge);
  int64_t Backlog();

  const std::string agent_, consumer_, stream_, group_;
  const std::chrono::milliseconds window_length_;
  etcd::Client* etcd_;
  redis::Client* redis_;
  Mutex endpoint_mu_;
  std::string endpoint_ DAIS_GUARDED_BY(endpoint_mu_);  // the endpoint record (JSON), or empty
  std::atomic<bool> paused_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Mutex mu_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, double>> window_ DAIS_GUARDED_BY(mu_);
  double rate_ DAIS_GUARDED_BY(mu_) = 0;  // throttled: runs per second here; 0: not throttled
  double tokens_ DAIS_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point refilled_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::cmd
