#include "cmd/serve_coord.h"

#include "cmd/serve.h"
#include "common/logging.h"
#include "control/load_coordinator.h"
#include "coord/lock_service.h"
#include "redis/client.h"

namespace dais::cmd {

struct CoordinationRuntime::Impl {
  std::unique_ptr<redis::Client> client;
  std::unique_ptr<coord::LockService> locks;
  std::unique_ptr<control::LockLoadCoordinator> coordinator;
};

StatusOr<std::unique_ptr<CoordinationRuntime>> CoordinationRuntime::Create(
    const ServeOptions& o, const std::string& node_id, ModelManager* manager) {
  std::string policy = o.coordination;
  if (policy == "auto") {
    bool redis = !o.features.redis.empty() || !o.lock_redis.empty();
    policy = redis && o.model_control_mode == "poll" ? "hierarchy" : "none";
  }
  if (policy == "none") return std::unique_ptr<CoordinationRuntime>();
  FeatureFlags redis_flags = o.features;
  if (!o.lock_redis.empty()) redis_flags.redis = o.lock_redis;
  if (redis_flags.redis.empty()) {
    return InvalidArgument("--coordination " + policy +
                           " needs --redis or --lock-redis (the locks live there)");
  }
  std::unique_ptr<CoordinationRuntime> rt(new CoordinationRuntime());
  rt->impl_ = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(rt->impl_->client, ConnectRedis(redis_flags));
  coord::LockServiceOptions lo;
  lo.node_id = node_id;
  lo.lease = std::chrono::milliseconds(o.lock_lease_ms);
  lo.wait_replicas = o.lock_wait_replicas;
  ASSIGN_OR_RETURN(rt->impl_->locks, coord::LockService::Create(rt->impl_->client.get(), lo));
  rt->impl_->coordinator = std::make_unique<control::LockLoadCoordinator>(
      rt->impl_->locks.get(),
      policy == "global" ? control::CoordinationPolicy::kGlobal
                         : control::CoordinationPolicy::kHierarchy,
      node_id, std::chrono::minutes(10));
  manager->SetCoordinator(rt->impl_->coordinator.get());
  LOG_INFO("coordination: {} locks on redis {} as node '{}' (lease {} ms)", policy,
           redis_flags.redis, node_id, o.lock_lease_ms);
  return rt;
}

CoordinationRuntime::~CoordinationRuntime() {
  if (!impl_) return;
  impl_->coordinator.reset();
  impl_->locks.reset();  // releases what it still holds, before its client goes
  impl_->client.reset();
}

void CoordinationRuntime::Cancel() {
  if (impl_ && impl_->coordinator) impl_->coordinator->Cancel();
}

}  // namespace dais::cmd
