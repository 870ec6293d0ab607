#include "cmd/serve_coord.h"

#include <algorithm>

#include "cmd/serve.h"
#include "common/logging.h"
#include "locks/load_coordinator.h"
#include "locks/lock_service.h"
#include "redis/client.h"

namespace dais::cmd {

struct CoordinationRuntime::Impl {
  std::unique_ptr<redis::Client> client;
  std::unique_ptr<locks::LockService> locks;
  std::unique_ptr<locks::LockLoadCoordinator> coordinator;
};

StatusOr<std::unique_ptr<CoordinationRuntime>> CoordinationRuntime::Create(
    const ServeOptions& o, const std::string& node_id, runtime::ModelManager* manager) {
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
  locks::LockServiceOptions lo;
  lo.node_id = node_id;
  lo.lease = std::chrono::milliseconds(o.lock_lease_ms);
  lo.wait_replicas = o.lock_wait_replicas;
  ASSIGN_OR_RETURN(rt->impl_->locks, locks::LockService::Create(rt->impl_->client.get(), lo));
  // A node id that cannot name a lock would fail every load: refuse it at start.
  if (Status s = locks::ValidateResource(locks::LockResource::Node("model", node_id)); !s.ok()) {
    return InvalidArgument("--node-id '" + node_id + "' cannot name a lock: " + s.message());
  }
  // A load waits for its lock at most one poll interval (at least 5 s): a lock held elsewhere
  // (an operator's MODEL lock, the global lock) never holds the whole poll up for long; the next
  // poll tries again.
  auto wait = std::chrono::seconds(std::max(5, o.repository_poll_secs));
  rt->impl_->coordinator = std::make_unique<locks::LockLoadCoordinator>(
      rt->impl_->locks.get(),
      policy == "global" ? locks::CoordinationPolicy::kGlobal
                         : locks::CoordinationPolicy::kHierarchy,
      node_id, wait);
  // Lock keys must not be evicted (docs/locks.md).
  auto mp = rt->impl_->client->Run({"", {"CONFIG", "GET", "maxmemory-policy"}});
  if (mp.ok() && mp->type == redis::Reply::Type::kArray && mp->elements.size() == 2 &&
      mp->elements[1].str != "noeviction") {
    LOG_WARNING(
        "coordination: redis {} has maxmemory-policy {}: it may evict lock keys and let "
        "two holders in; give the locks a noeviction Redis with --lock-redis",
        redis_flags.redis, mp->elements[1].str);
  }
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
