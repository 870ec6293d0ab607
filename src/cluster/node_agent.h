// The cluster side of `dais node`: a `dais serve` that registers itself in etcd, runs what the
// scheduler assigns to it and reports what it holds.
//
//   - Registers /dais/nodes/<id> (capacity, addresses, labels) under a lease of
//     `lease_ttl_secs`, renewed every third of it: when the process dies the entry is gone within
//     the TTL. A lease that expired meanwhile (etcd was away longer than the TTL) is replaced and
//     everything registered again.
//   - Watches /dais/assignments/<id>/ (etcd/watch.h: resumes after disconnects, resyncs after
//     compaction) and loads / unloads models through the ModelManager's explicit-mode path (the
//     same lock hierarchy as the repository API), one at a time, off the watch thread.
//   - Loads the assignment's version (a pin that overrides the repository's version policy; -1:
//     the policy) and loads again when the assignment's version changes.
//   - Publishes /dais/instances/<id>/<model> (version, LOADING / READY / FAILED with the reason,
//     the GPU indices the assignment gave) under the same lease, written only when a state
//     changes.
//   - An assignment that carries a job (a training job: assigned_job.h) is not loaded: the
//     `jobs` factory creates it, and its state is published like an instance's.
// The request path never touches etcd: with etcd unreachable the node keeps serving what it has
// and catches up when etcd is back.
//
// Threading: a registration thread (lease, publication), a reconcile thread (loads), and the
// watch's thread; Stop joins them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/assigned_job.h"
#include "cluster/assignment.h"
#include "cluster/capacity.h"
#include "cluster/version_resolution.h"
#include "common/mutex.h"
#include "etcd/client.h"
#include "etcd/watch.h"
#include "runtime/model_manager.h"

namespace dais::cluster {

struct NodeAgentOptions {
  std::string node_id;
  std::vector<std::string> etcd_endpoints;
  int lease_ttl_secs = 10;
  NodeCapacity capacity;
  std::string http_endpoint;  // host:port where clients reach the node's HTTP endpoint
  std::string grpc_endpoint;
  std::string metrics_endpoint;  // host:port of GET /metrics (service discovery); may be empty
  // Scanned for the versions of each model, published in the registration ("versions") so
  // the scheduler can resolve a deployment without `version:` (version_resolution.h).
  std::vector<std::string> repositories;
  // Runs the jobs assigned to the node (training jobs); absent: such an assignment is FAILED.
  JobFactory jobs;
};

class NodeAgent {
 public:
  // `manager` (borrowed) must run in explicit model control mode and outlive the agent.
  NodeAgent(NodeAgentOptions options, runtime::ModelManager* manager);
  ~NodeAgent();

  // InvalidArgument for bad options; etcd being unreachable is not an error (retried).
  Status Start();
  // Stops the threads; with `leave`, revokes the lease so the node and its instances leave etcd
  // at once (a graceful stop) instead of at the lease's expiry.
  void Stop(bool leave);

 private:
  void RegistrationLoop();
  Status Register();
  void RepublishIfRepositoryChanged(int64_t lease);
  void Publish();
  void ReconcileLoop();
  void OnAssignments(const std::vector<etcd::Event>& events, const etcd::RangeResult* snapshot);
  // Starts, restarts (its spec changed) and stops the jobs of `desired` (reconcile thread).
  void ReconcileJobs(const std::map<std::string, Assignment>& desired,
                     std::map<std::string, std::string>* held);

  const NodeAgentOptions options_;
  runtime::ModelManager* manager_;
  std::unique_ptr<etcd::Client> client_;
  std::unique_ptr<etcd::Watcher> watcher_;
  std::thread registration_;
  std::thread reconcile_;

  Mutex mu_;
  CondVar cv_;
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  // What the registration last published of the repositories (the registration thread's).
  RepositoryVersions registered_versions_;
  int64_t lease_ DAIS_GUARDED_BY(mu_) = 0;                             // 0: not registered
  std::map<std::string, Assignment> desired_ DAIS_GUARDED_BY(mu_);     // model -> assignment
  std::map<std::string, std::string> published_ DAIS_GUARDED_BY(mu_);  // model -> state JSON
  // Assigned models whose load failed before the manager knew them (not in the repository).
  std::map<std::string, std::string> failed_ DAIS_GUARDED_BY(mu_);  // model -> reason
  bool desired_changed_ DAIS_GUARDED_BY(mu_) = false;
  // The jobs running here: name -> job (created and destroyed on the reconcile thread).
  std::map<std::string, std::shared_ptr<AssignedJob>> jobs_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::cluster
