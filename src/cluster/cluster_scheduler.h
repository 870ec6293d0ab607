// The live scheduler (`dais scheduler --etcd ...`), run as two or more replicas.
//
// Leadership: one replica holds /dais/scheduler/leader, created in a transaction only when it
// does not exist, under the replica's lease (renewed every third of the TTL). Standbys watch the
// key and campaign when it disappears: a leader killed or frozen past its TTL is replaced within
// the TTL. Every write a leader makes is one transaction conditioned on its key's create
// revision, so a deposed leader (frozen, then resumed) cannot overwrite its successor's work.
//
// Placement: the leader keeps a view of nodes, deployments, assignments and instance states
// (etcd watches; no polling) and, whenever it changes, reconciles: assignments on nodes that
// left are dropped (their instances are placed again), extra replicas are removed, missing ones
// placed by the policy (scheduler/policy.h) among the nodes that match the deployment's labels
// and are not cordoned, one instance of a model per node; an instance reported FAILED is moved
// and its node avoided for that deployment for a backoff that doubles (10 s to 5 min). What
// cannot be placed stays pending, with a reason in /dais/status/<deployment>.
//
// Threading: one loop thread plus the watches' threads; Stop joins them.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/events.h"
#include "common/mutex.h"
#include "etcd/client.h"
#include "etcd/watch.h"
#include "placement/cluster.h"

namespace dais::cluster {

struct ClusterSchedulerOptions {
  std::string id;  // this replica's name (in the leader key)
  std::vector<std::string> etcd_endpoints;
  int lease_ttl_secs = 5;
  std::string policy = "dais";
};

class ClusterScheduler {
 public:
  explicit ClusterScheduler(ClusterSchedulerOptions options);
  ~ClusterScheduler();
  Status Start();
  void Stop();
  // The create revision of this replica's leadership key; 0 when it does not lead. Other
  // leader-only work (the rollout controller) conditions its writes on it.
  int64_t leader_revision() const { return leader_revision_shared_.load(); }

 private:
  // A prefix's keys and values as the watch last saw them.
  struct View {
    std::map<std::string, std::string> kv;
  };
  void Watch(const std::string& prefix, View* view);
  void Loop();
  bool Campaign();
  void StepDown();
  // One reconciliation; false when leadership was lost.
  bool Reconcile();
  struct Plan;
  // The plan's operations and the pending events in one transaction conditioned on leadership;
  // false when leadership was lost.
  bool Write(Plan& plan);
  // Keeps the assignments that still hold (applying them to the plan's cluster), deletes the
  // others.
  void KeepOrDrop(Plan& plan);
  // Places the missing replicas of every deployment, latency-sensitive ones first; records their
  // status.
  void PlaceMissing(Plan& plan);
  void Exclude(Plan& plan, const struct DeploymentSpec& d, std::vector<std::string>* why);
  // Room for `task` made by removing best-effort instances from one node, or nullopt.
  std::optional<placement::Placement> Preempt(Plan& plan, const struct DeploymentSpec& d,
                                              const placement::TaskSpec& task);
  // Deletes an assignment; `reason` is the metric's label.
  void Unassign(Plan& plan, const std::string& key, const std::string& deployment,
                const std::string& node, const std::string& reason, const std::string& why);
  ClusterEvent NewEvent(std::string kind, std::string deployment, std::string node,
                        std::string message) const;

  const ClusterSchedulerOptions options_;
  std::unique_ptr<etcd::Client> client_;
  std::vector<std::unique_ptr<etcd::Watcher>> watchers_;
  std::thread loop_;

  Mutex mu_;
  CondVar cv_;
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  bool dirty_ DAIS_GUARDED_BY(mu_) = true;
  View nodes_ DAIS_GUARDED_BY(mu_);
  View deployments_ DAIS_GUARDED_BY(mu_);
  View trainings_ DAIS_GUARDED_BY(mu_);    // training jobs (training_job.h)
  View collections_ DAIS_GUARDED_BY(mu_);  // vector memory (collection_placement.h)
  View agents_ DAIS_GUARDED_BY(mu_);       // agents' runtimes (agent_placement.h)
  View assignments_ DAIS_GUARDED_BY(mu_);
  View instances_ DAIS_GUARDED_BY(mu_);
  View leader_view_ DAIS_GUARDED_BY(mu_);
  View cordoned_ DAIS_GUARDED_BY(mu_);

  // Loop thread only.
  int64_t lease_ = 0;
  int64_t leader_revision_ = 0;  // create revision of our leader key; 0: not leader
  std::atomic<int64_t> leader_revision_shared_{0};  // the same, for other threads
  bool retry_ = false;                         // the last reconciliation's write did not reach etcd
  std::map<std::string, std::string> status_;  // deployment -> last status JSON written
  struct Backoff {
    std::chrono::steady_clock::time_point until;
    std::chrono::seconds length{0};
  };
  std::map<std::string, Backoff> avoid_;      // "<deployment>@<node>" -> until when
  std::vector<ClusterEvent> pending_events_;  // written with the next transaction
  int64_t events_lease_ = 0;
  std::chrono::steady_clock::time_point events_lease_granted_;
  int64_t event_sequence_ = 0;
};

}  // namespace dais::cluster
