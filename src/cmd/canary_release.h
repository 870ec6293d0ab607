// The canary release of a published version, shared by training jobs (training_runner.h) and
// `dais fed serve`: a deployment of the new version (named <route>-v<N>, a copy of
// release.deployment's resources and replicas) is applied; once one of its instances is READY
// the route's rollout starts (gateway/rollout_start.h) with the release's steps and limits, and
// the leading scheduler analyses it like any other (latency, errors, score PSI, live accuracy)
// and promotes or rolls it back.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cluster/training_job.h"
#include "etcd/client.h"

namespace dais::cmd {

struct ReleaseHooks {
  std::function<bool()> stopping;                   // true: give up now (returns "")
  std::function<void(const std::string&)> waiting;  // a status line while it waits
  std::function<void(const std::string&)> event;    // something that happened
  std::function<void(int64_t)> sleep_ms;
  std::function<int64_t()> now_ms;  // Unix milliseconds
};

// Retried until release.ready_timeout. The outcome line ("canary rollout of R v1 -> v2
// started", "release failed: ..."), or "" when stopped first.
std::string ReleaseByCanary(etcd::Client& client, const cluster::TrainingRelease& release,
                            int64_t version, const ReleaseHooks& hooks);

}  // namespace dais::cmd
