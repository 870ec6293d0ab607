#include "gateway/rollout_start.h"

#include "gateway/route.h"

namespace dais::gateway {

StatusOr<RouteAndRollout> ReadRouteAndRollout(etcd::Client& c, const std::string& route) {
  RouteAndRollout r;
  ASSIGN_OR_RETURN(etcd::RangeResult a, c.Get(kRoutesPrefix + route));
  ASSIGN_OR_RETURN(etcd::RangeResult b, c.Get(kRolloutsPrefix + route));
  if (!a.kvs.empty()) {
    r.route = a.kvs[0].value;
    r.route_revision = a.kvs[0].mod_revision;
  }
  if (!b.kvs.empty()) {
    r.rollout = b.kvs[0].value;
    r.rollout_revision = b.kvs[0].mod_revision;
  }
  return r;
}

Status WriteRouteAndRollout(etcd::Client& c, const RouteAndRollout& read,
                            const std::string& route_name, const std::string& rollout,
                            const std::string& route) {
  using etcd::Compare;
  std::vector<Compare> unchanged = {{kRoutesPrefix + route_name, Compare::Target::kModRevision,
                                     Compare::Op::kEqual, read.route_revision, ""},
                                    {kRolloutsPrefix + route_name, Compare::Target::kModRevision,
                                     Compare::Op::kEqual, read.rollout_revision, ""}};
  std::vector<etcd::Op> ops = {{etcd::Op::Kind::kPut, kRoutesPrefix + route_name, route, 0, false}};
  if (!rollout.empty()) {
    ops.push_back({etcd::Op::Kind::kPut, kRolloutsPrefix + route_name, rollout, 0, false});
  }
  ASSIGN_OR_RETURN(etcd::TxnResult t, c.Txn(unchanged, ops));
  if (!t.succeeded) {
    return FailedPrecondition("the route or its rollout changed meanwhile: try again");
  }
  return OkStatus();
}

StatusOr<Rollout> StartRollout(etcd::Client& c, Rollout r, int64_t now_ms) {
  ASSIGN_OR_RETURN(RouteAndRollout read, ReadRouteAndRollout(c, r.route));
  auto route = ParseRoute(read.route);
  if (read.route.empty() || !route.ok()) {
    return NotFound("no route '" + r.route + "' (dais ctl apply -f route.yaml)");
  }
  if (auto old = RolloutFromJson(read.rollout);
      old.ok() && (old->state == "running" || old->state == "paused")) {
    return AlreadyExists(r.route + " is already rolling out v" + std::to_string(old->to) +
                         " (step " + std::to_string(old->step + 1) + " of " +
                         std::to_string(old->steps.size()) + ")");
  }
  r.from = route->stable;
  r.state = "running";
  r.step = 0;
  r.step_started_ms = now_ms;
  r.history.clear();
  r.reason.clear();
  RETURN_IF_ERROR(ValidateRollout(r));
  const RouteSpec next = RouteAtWeight(*route, r.from, r.to, r.steps[0]);
  RETURN_IF_ERROR(WriteRouteAndRollout(c, read, r.route, r.ToJson(), RouteToJson(next)));
  return r;
}

}  // namespace dais::gateway
