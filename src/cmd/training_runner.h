// A training job on the node the scheduler placed it on (cluster/training_job.h): runs
// `dais train --config <config>` as a child process whenever the schedule says so (the last run
// ended `every` ago, or `after_labels` labels arrived on the label stream since it started),
// records each run in /dais/training-runs/<job>, and releases what a run published:
//   - canary: a deployment of the new version (named <route>-v<N>, the resources and replicas of
//     release.deployment) is applied; once one of its instances is READY the route's rollout
//     starts (gateway/rollout_start.h) with the release's steps and limits; the leading scheduler
//     analyses it like any other (latency, errors, score PSI) and promotes or rolls it back.
//   - manual: nothing more; the run's result says which version waits.
// The run state lives in etcd, not here: a job re-placed after its node died keeps its schedule,
// and a release that a dead node published but did not start is started by the next one.
// A run of a job with after_labels first waits (up to a minute) until the label stream's consumer
// groups have nothing pending or unread (the archivers committed the labels that triggered it).
// A job never runs before its first schedule point, except that a job with `every` that never
// ran runs at once. The child dies with the node (PR_SET_PDEATHSIG) and is stopped (SIGTERM) when
// the job is unassigned.
//
// Threading: one thread per job; the AssignedJob interface is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/assigned_job.h"

namespace dais::cmd {

struct TrainingRunnerOptions {
  std::string node_id;
  std::vector<std::string> etcd_endpoints;
  std::string dais_binary;  // the executable that runs `train` (this one: /proc/self/exe)
};

// The node's JobFactory for training jobs. InvalidArgument (the node reports the job FAILED and
// the scheduler moves it) when the spec, or the training.yaml it names, is unusable here.
StatusOr<std::unique_ptr<cluster::AssignedJob>> StartTrainingJob(
    const TrainingRunnerOptions& options, const cluster::Assignment& assignment,
    std::function<void()> changed);

}  // namespace dais::cmd
