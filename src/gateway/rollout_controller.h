// Drives the running rollouts (rollout.h) from the leading `dais scheduler`: every 250 ms it
// takes the canary's figures since its step began and advances, promotes or rolls back. The
// figures come from Prometheus when a URL is given (PromQL over its HTTP API: increase() of the
// gateways' request counter and duration histogram over the step's age), else from scraping the
// registered gateways' /metrics (/dais/gateways/<id>) directly. With max_psi, the canary's and
// the stable version's score histograms come from scraping the registered nodes' /metrics
// (/dais/nodes/<id>, dais_inference_score) the same way, Prometheus or not. Its writes (the rollout
// record and the route, in one transaction) are conditioned on the scheduler's leadership key, as
// the placement's are: a deposed leader cannot step a rollout.
//
// A new leader measures the current step from its own first scrape (the step's figures restart;
// the step's start time and the interval do not).
//
// Threading: one thread plus the watches'; Stop joins them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "etcd/client.h"
#include "etcd/watch.h"
#include "gateway/rollout.h"

namespace dais::gateway {

class UpstreamPool;

class RolloutController {
 public:
  // `leader_revision` returns the create revision of this replica's leadership key, 0 when it
  // does not lead.
  // `prometheus` ("host:port", empty: scrape the gateways) is where the figures come from.
  // `accuracy` (absent: rollouts with an accuracy label wait, saying the scheduler has no
  // feedback and label streams) answers the live-accuracy joins.
  RolloutController(std::vector<std::string> etcd_endpoints,
                    std::function<int64_t()> leader_revision, std::string leader_key,
                    std::string prometheus = "", AccuracySource accuracy = {});
  ~RolloutController();
  Status Start();
  void Stop();

 private:
  void Loop();
  // `json`: the record as read (the write is refused if it changed since).
  void Step(const Rollout& r, const std::string& json, int64_t revision);
  // The canary's figures since its step began (and the scores' PSI with max_psi); false when
  // nothing could be measured this round (or the step's baseline was just taken).
  bool Measure(const Rollout& r, int64_t now_ms, Figures* f);
  // The metrics of every registered gateway (or node: /dais/nodes/, for the scores) that
  // answered, by address; false when none did.
  bool ScrapeRegistered(bool nodes, std::map<std::string, Scrape>* out);
  // What the scrapes of `now` counted since the step's baseline (per address; one first seen
  // counts from now on). Resets the baseline when the step changed: then false.
  bool SinceBaseline(std::map<std::string, Scrape>& baseline, std::map<std::string, Scrape> now,
                     bool reset, Scrape* since);
  // The canary's figures since the step began, from Prometheus; false when it did not answer.
  bool QueryPrometheus(const Rollout& r, int64_t now_ms, Figures* out);
  // One instant query's scalar (the sum of the vector's values; 0 for an empty one).
  StatusOr<double> Query(const std::string& promql);
  // GET `target` of `address`: the body of a 200 answer.
  StatusOr<std::string> Get(const std::string& address, const std::string& target);

  const std::vector<std::string> endpoints_;
  const std::function<int64_t()> leader_revision_;
  const std::string leader_key_;
  const std::string prometheus_;
  const AccuracySource accuracy_;
  std::unique_ptr<etcd::Client> client_;
  std::unique_ptr<UpstreamPool> pool_;
  std::vector<std::unique_ptr<etcd::Watcher>> watchers_;
  std::thread thread_;

  Mutex mu_;
  CondVar cv_;
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> rollouts_ DAIS_GUARDED_BY(mu_), routes_ DAIS_GUARDED_BY(mu_),
      gateways_ DAIS_GUARDED_BY(mu_), nodes_ DAIS_GUARDED_BY(mu_);
  std::map<std::string, int64_t> revisions_ DAIS_GUARDED_BY(mu_);  // key -> mod revision

  // Loop thread only: the scrape each running step is measured from.
  struct Baseline {
    int step = -1;
    int64_t step_started_ms = 0;
    std::map<std::string, Scrape> scrapes;       // by gateway address
    std::map<std::string, Scrape> node_scrapes;  // by node address (max_psi only)
  };
  std::map<std::string, Baseline> baselines_;
};

}  // namespace dais::gateway
