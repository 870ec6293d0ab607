// The agent orchestrator on the leading scheduler (agents/orchestrator.h decides): every 250 ms
// it reads the agents, what their runtimes report and the current controls from etcd, and writes
// the decisions (/dais/agent-control/<agent>) and an event with the reason (`dais ctl get
// events`), conditioned on still leading.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agents/orchestrator.h"
#include "dais/status.h"
#include "etcd/client.h"

namespace dais::cmd {

class AgentOrchestratorLoop {
 public:
  AgentOrchestratorLoop(std::vector<std::string> etcd, std::string scheduler_id,
                        std::function<int64_t()> leader_revision,
                        agents::OrchestratorOptions options);
  ~AgentOrchestratorLoop();
  Status Start();
  void Stop();

 private:
  void Loop();
  void Tick(int64_t revision);

  std::vector<std::string> etcd_endpoints_;
  std::string id_;
  std::function<int64_t()> leader_revision_;
  agents::OrchestratorOptions options_;
  std::unique_ptr<agents::Orchestrator> policy_;
  std::unique_ptr<etcd::Client> client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int64_t sequence_ = 0;
};

}  // namespace dais::cmd
