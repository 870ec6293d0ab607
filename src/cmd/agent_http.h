// The HTTP trigger of `dais agent run` (docs/agents.md, "Triggers"): POST /v1/agents/<name>/runs
// on the runtime's metrics port, with the event's fields as a JSON object. The run is made on one
// of the runtime's workers and answered when it ends: 200 with {"run_id", "outcome", "trace",
// "context"} for a run that completed or stopped at a branch, 502 for one that failed (the step
// and its error named), 503 with Retry-After while the orchestrator has the agent paused or
// every worker is busy and the queue full, 400 for a body that is not a JSON object or an
// Idempotency-Key over 200 bytes, 401 without the runtime's key when it has one (below). A
// refusal made before any run started carries x-dais-not-run: 1 (the gateway then tries another
// runtime). A request with Idempotency-Key K runs as run "h:K": its
// emits and txn steps are keyed by it, so a client retrying with the same key writes nothing
// twice. The gateway forwards POST /v1/agents/<name>/runs here (gateway/agent_proxy.cc) with
// the header x-dais-agent-key: the key this runtime published with its endpoint in etcd (random
// per start; --trigger-key sets one), so that only callers that can read the cluster's etcd (the
// gateway) reach the trigger past the gateway's authentication and rate limits.
// A failed run: 504 when its deadline passed, 422 when the event could not be run as given (a
// reference to nothing, a value a conversion or a tensor refused, a 4xx from a step's server),
// 502 otherwise; the step and its error named.
#pragma once

#include <rapidjson/document.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agents/agent_spec.h"
#include "cmd/agent.h"
#include "cmd/agent_actions.h"
#include "cmd/agent_live.h"
#include "cmd/agent_runs.h"
#include "frontends/http/http_server.h"

namespace dais::cmd {

class AgentHttpTrigger {
 public:
  // `workers` threads, each with its own connections (AgentActions); at most `queue` requests
  // wait for one.
  // `key`: what callers must send in x-dais-agent-key (empty: nothing required).
  AgentHttpTrigger(const agents::AgentSpec& spec, const AgentCliOptions& o, redis::Client* redis,
                   AgentMetrics* metrics, AgentLive* live, int workers, size_t queue,
                   std::string key);
  ~AgentHttpTrigger();  // Close()
  // Finishes the runs in progress and answers the queued calls and later ones 503.
  void Close();
  // True when `r` is this agent's trigger (answered through `w`), false otherwise.
  bool Handle(const frontends::http::Request& r, frontends::http::Responder& w);
  std::string path() const { return path_; }

 private:
  struct Job {
    std::string run_id;
    std::shared_ptr<rapidjson::Document> event;  // a JSON object
    std::chrono::steady_clock::time_point arrived;
    frontends::http::Responder respond;
  };
  void Work();
  frontends::http::Response Run(AgentActions& actions, Job& job);

  const agents::AgentSpec& spec_;
  const AgentCliOptions& o_;
  redis::Client* redis_;
  AgentMetrics* metrics_;
  AgentLive* live_;
  const size_t max_queue_;
  const std::string key_;
  const std::string path_;
  std::atomic<int64_t> next_id_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  int idle_ = 0;           // guarded by mu_
  bool stop_ = false;      // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace dais::cmd
