// Starting a rollout and the read-check-write of a route with its rollout record: shared by
// `dais ctl rollout start / rollback` and by training jobs that release what they published
// (cmd/training_runner.h), so both start a rollout the same way (docs/gateway.md, "Rollouts").
#pragma once

#include <cstdint>
#include <string>

#include "dais/status.h"
#include "etcd/client.h"
#include "gateway/rollout.h"

namespace dais::gateway {

// The route and rollout records with their mod revisions (0: absent).
struct RouteAndRollout {
  std::string route, rollout;
  int64_t route_revision = 0, rollout_revision = 0;
};

StatusOr<RouteAndRollout> ReadRouteAndRollout(etcd::Client& c, const std::string& route);

// Writes the route (and the rollout record unless `rollout` is empty) in one transaction, only
// if neither changed since `read`; FailedPrecondition when one did.
Status WriteRouteAndRollout(etcd::Client& c, const RouteAndRollout& read,
                            const std::string& route_name, const std::string& rollout,
                            const std::string& route);

// Starts `request` (route, to, steps and limits set): from is the route's stable version, the
// route goes to the first step in the same transaction as the record. NotFound: no such route;
// AlreadyExists: a rollout of it is running; InvalidArgument: the request is not valid
// (ValidateRollout); FailedPrecondition: the route changed meanwhile; etcd's errors otherwise.
StatusOr<Rollout> StartRollout(etcd::Client& c, Rollout request, int64_t now_ms);

}  // namespace dais::gateway
