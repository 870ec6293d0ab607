#include "redis/router.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "common/logging.h"
#include "common/thread_checker.h"
#include "redis/redis_metrics.h"
#include "redis/slot.h"

namespace dais::redis {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Batch {
  std::vector<StatusOr<Reply>> results;
  std::vector<bool> answered;
  size_t remaining = 0;
  bool finished = false;
  BatchCallback cb;
  std::optional<asio::steady_timer> timer;
};

namespace {

const std::string kAsking = EncodeCommand({"ASKING"});
const std::string kShuttingDown = "redis client shutting down";

std::string HostOf(const std::string& address) {
  std::string host;
  uint16_t port;
  if (!SplitHostPort(address, &host, &port).ok()) return "";
  return host;
}

}  // namespace

// ---- ClientState ----

void ClientState::SetReachable(bool reachable) {
  MutexLock lock(&mu_);
  reachable_ = reachable;
  cv_.SignalAll();
}

bool ClientState::reachable() const {
  MutexLock lock(&mu_);
  return reachable_;
}

bool ClientState::WaitReachable(Deadline deadline) const {
  MutexLock lock(&mu_);
  while (!reachable_) {
    if (!cv_.WaitUntil(deadline)) return reachable_;
  }
  return true;
}

void ClientState::SetMasters(std::vector<std::string> masters) {
  MutexLock lock(&mu_);
  masters_ = std::move(masters);
}

std::vector<std::string> ClientState::masters() const {
  MutexLock lock(&mu_);
  return masters_;
}

void ClientState::SetClusterMode(bool cluster) {
  MutexLock lock(&mu_);
  cluster_mode_ = cluster;
}

bool ClientState::cluster_mode() const {
  MutexLock lock(&mu_);
  return cluster_mode_;
}

// ---- Router: lifecycle, discovery, topology ----

Router::Router(asio::io_context* io, const ClientOptions& options, ClientState* state)
    : io_(io), options_(options), state_(state), health_timer_(*io), refresh_timer_(*io) {}

Router::~Router() {
  if (reachable_) RedisMetrics::Get().reachable.Add(-1);
}

void Router::Start() {
  DAIS_DCHECK_ON_THREAD(thread_);
  for (const std::string& seed : options_.seeds) GetOrCreatePool(seed);
  ArmHealthTimer();
}

void Router::ArmHealthTimer() {
  health_timer_.expires_after(options_.health_check_interval);
  health_timer_.async_wait([this](error_code ec) {
    if (ec || shutting_down_) return;
    HealthTick();
    ArmHealthTimer();
  });
}

void Router::ArmRefreshTimer() {
  refresh_timer_.expires_after(options_.slot_refresh_interval);
  refresh_timer_.async_wait([this](error_code ec) {
    if (ec || shutting_down_) return;
    Refresh();
    ArmRefreshTimer();
  });
}

void Router::HealthTick() {
  DAIS_DCHECK_ON_THREAD(thread_);
  retired_.clear();
  const auto now = Clock::now();
  std::vector<NodePool*> pools;
  for (auto& [address, pool] : pools_) pools.push_back(pool.get());
  for (NodePool* pool : pools) pool->HealthTick(now, options_.health_check_interval);
  OnPoolChange();
  // A master is unreachable: it may have failed over, and a dead node sends no MOVED. Refresh
  // the map every tick until all masters are reachable again.
  if (cluster_ && discovered_ && !reachable_) Refresh();
}

void Router::OnPoolChange() {
  if (shutting_down_) return;
  if (!discovered_ && !discovering_) {
    for (auto& [address, pool] : pools_) {
      if (pool->Pick() != nullptr) {
        Discover(pool.get());
        break;
      }
    }
  }
  UpdateReachable();
}

void Router::Discover(NodePool* pool) {
  Connection* conn = pool->Pick();
  if (conn == nullptr) return;
  discovering_ = true;
  const std::string address = pool->address();
  const Deadline deadline = Clock::now() + options_.connect_timeout + options_.command_timeout;
  conn->Send(EncodeCommand({"INFO", "cluster"}), deadline, [this, address](StatusOr<Reply> r) {
    if (shutting_down_) return;
    if (!r.ok() || r->type != Reply::Type::kBulk) {
      discovering_ = false;  // the next health tick tries again
      LOG_WARNING("redis {}: INFO cluster failed: {}", address,
                  r.ok() ? ReplyToString(*r) : r.status().ToString());
      return;
    }
    if (r->str.find("cluster_enabled:1") == std::string::npos) {
      discovered_ = true;
      discovering_ = false;
      standalone_ = address;
      // Only the node that answered first is used; other seeds are dropped.
      for (auto it = pools_.begin(); it != pools_.end();) {
        if (it->first == address) {
          ++it;
        } else {
          it->second->Shutdown(Unavailable("redis: seed unused in standalone mode"));
          retired_.push_back(std::move(it->second));
          it = pools_.erase(it);
        }
      }
      state_->SetMasters({address});
      LOG_INFO("redis {}: standalone mode", address);
      UpdateReachable();
      return;
    }
    cluster_ = true;
    state_->SetClusterMode(true);
    NodePool* pool = FindPool(address);
    Connection* conn = pool ? pool->Pick() : nullptr;
    if (conn == nullptr) {
      discovering_ = false;
      return;
    }
    const Deadline deadline = Clock::now() + options_.connect_timeout + options_.command_timeout;
    conn->Send(EncodeCommand({"CLUSTER", "SLOTS"}), deadline, [this, address](StatusOr<Reply> r) {
      if (shutting_down_) return;
      discovering_ = false;
      StatusOr<SlotMap> map =
          r.ok() ? ParseClusterSlots(*r, HostOf(address)) : StatusOr<SlotMap>(r.status());
      if (!map.ok() || map->covered() == 0) {
        LOG_WARNING("redis {}: CLUSTER SLOTS failed: {}", address,
                    map.ok() ? "no slot served" : map.status().ToString());
        return;
      }
      discovered_ = true;
      LOG_INFO("redis {}: cluster mode, {} masters, {} of {} slots served", address,
               map->masters.size(), map->covered(), kSlotCount);
      ApplyTopology(std::move(*map));
      ArmRefreshTimer();
    });
  });
}

void Router::Refresh() {
  DAIS_DCHECK_ON_THREAD(thread_);
  if (!cluster_ || !discovered_ || shutting_down_) return;
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  // Any master that has a ready connection, round-robin; else any pool.
  Connection* conn = nullptr;
  std::string address;
  const size_t n = map_.masters.size();
  for (size_t i = 0; i < n && conn == nullptr; ++i) {
    const std::string& a = map_.masters[(round_robin_ + i) % n];
    if (NodePool* pool = FindPool(a)) {
      conn = pool->Pick();
      address = a;
    }
  }
  for (auto it = pools_.begin(); it != pools_.end() && conn == nullptr; ++it) {
    conn = it->second->Pick();
    address = it->first;
  }
  ++round_robin_;
  if (conn == nullptr) return;  // the next tick tries again
  refreshing_ = true;
  const Deadline deadline = Clock::now() + options_.connect_timeout + options_.command_timeout;
  conn->Send(EncodeCommand({"CLUSTER", "SLOTS"}), deadline, [this, address](StatusOr<Reply> r) {
    if (shutting_down_) return;
    refreshing_ = false;
    StatusOr<SlotMap> map =
        r.ok() ? ParseClusterSlots(*r, HostOf(address)) : StatusOr<SlotMap>(r.status());
    if (map.ok() && map->covered() > 0) {
      ApplyTopology(std::move(*map));
    } else {
      LOG_WARNING("redis {}: slot refresh failed: {}", address,
                  map.ok() ? "no slot served" : map.status().ToString());
    }
    if (refresh_again_) {
      refresh_again_ = false;
      Refresh();
    }
  });
}

void Router::ApplyTopology(SlotMap map) {
  map_ = std::move(map);
  for (const std::string& a : map_.masters) GetOrCreatePool(a);
  // Pools of nodes that no longer serve a slot: shut down (their pending requests fail with
  // Unavailable) and freed on a later turn, as this may run inside one of their callbacks.
  for (auto it = pools_.begin(); it != pools_.end();) {
    bool master = false;
    for (const std::string& a : map_.masters) master = master || a == it->first;
    if (master) {
      ++it;
      continue;
    }
    it->second->Shutdown(Unavailable("redis node " + it->first + " no longer serves a slot"));
    retired_.push_back(std::move(it->second));
    it = pools_.erase(it);
  }
  state_->SetMasters(map_.masters);
  UpdateReachable();
}

void Router::UpdateReachable() {
  bool reachable = false;
  if (discovered_ && !shutting_down_) {
    if (!cluster_) {
      NodePool* pool = FindPool(standalone_);
      reachable = pool != nullptr && pool->Reachable();
    } else {
      reachable = !map_.masters.empty();
      for (const std::string& a : map_.masters) {
        NodePool* pool = FindPool(a);
        reachable = reachable && pool != nullptr && pool->Reachable();
      }
    }
  }
  if (reachable == reachable_) return;
  reachable_ = reachable;
  RedisMetrics::Get().reachable.Add(reachable ? 1 : -1);
  state_->SetReachable(reachable);
}

NodePool* Router::FindPool(const std::string& address) {
  auto it = pools_.find(address);
  return it == pools_.end() ? nullptr : it->second.get();
}

NodePool* Router::GetOrCreatePool(const std::string& address) {
  if (NodePool* pool = FindPool(address)) return pool;
  auto pool = std::make_unique<NodePool>(io_, address, options_, [this] { OnPoolChange(); });
  NodePool* raw = pool.get();
  pools_.emplace(address, std::move(pool));
  raw->Start();
  return raw;
}

Status Router::NotConnectedStatus() const {
  std::string detail;
  for (const auto& [address, pool] : pools_) {
    Status s = pool->NotReadyStatus();
    if (s.code() == StatusCode::kUnauthenticated) return s;
    if (pool->Pick() == nullptr) {
      if (!detail.empty()) detail += "; ";
      detail += s.message();
    }
  }
  if (detail.empty()) return Unavailable("redis: detecting standalone or cluster mode");
  return Unavailable("redis: not connected (" + detail + ")");
}

// ---- Router: requests ----

void Router::Submit(std::vector<OpPtr> ops, Deadline deadline, BatchCallback cb) {
  DAIS_DCHECK_ON_THREAD(thread_);
  auto batch = std::make_shared<Batch>();
  batch->results.assign(ops.size(), DeadlineExceeded("redis command deadline exceeded"));
  batch->answered.assign(ops.size(), false);
  batch->remaining = ops.size();
  batch->cb = std::move(cb);
  if (shutting_down_) {
    for (auto& r : batch->results) r = Unavailable(kShuttingDown);
    RedisMetrics::Get().failed.Increment(static_cast<double>(ops.size()));
    return Finish(batch);
  }
  if (ops.empty()) return Finish(batch);
  if (deadline <= Clock::now()) return OnDeadline(batch);
  live_.emplace(batch.get(), batch);
  batch->timer.emplace(*io_);
  batch->timer->expires_at(deadline);
  batch->timer->async_wait([this, batch](error_code ec) {
    if (!ec) OnDeadline(batch);
  });
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i]->batch = batch;
    ops[i]->index = i;
    ops[i]->deadline = deadline;
  }
  // One connection per node for the whole batch: the batch's commands to a node go out in one
  // write and run in input order there.
  std::map<NodePool*, Connection*> pinned;
  pinned_ = &pinned;
  for (const OpPtr& op : ops) Dispatch(op);
  pinned_ = nullptr;
}

void Router::Dispatch(const OpPtr& op) {
  if (op->batch->finished) return;
  if (!op->invalid.ok()) return Complete(op, op->invalid);
  NodePool* pool = nullptr;
  if (!op->node.empty()) {
    if (!discovered_) return Complete(op, NotConnectedStatus());
    pool = FindPool(op->node);
    if (pool == nullptr) {
      return Complete(op, NotFound("redis node " + op->node + " is not a known master"));
    }
  } else if (!op->target.empty()) {
    pool = GetOrCreatePool(op->target);
  } else if (!discovered_) {
    return Complete(op, NotConnectedStatus());
  } else if (!cluster_) {
    pool = FindPool(standalone_);
  } else {
    const std::string* owner = nullptr;
    if (op->key.empty()) {
      if (!map_.masters.empty()) owner = &map_.masters[round_robin_++ % map_.masters.size()];
    } else {
      const uint16_t slot = KeySlot(op->key);
      owner = map_.Owner(slot);
      if (owner == nullptr) {
        return Complete(op, Unavailable("redis cluster: slot " + std::to_string(slot) +
                                        " is not served by any master"));
      }
    }
    if (owner == nullptr) return Complete(op, Unavailable("redis cluster: no master"));
    pool = GetOrCreatePool(*owner);
  }
  if (pool == nullptr) {
    DAIS_BUG("redis: no pool for a routed command");
    return Complete(op, Internal("redis: no pool for a routed command"));
  }
  Connection* conn = nullptr;
  if (pinned_ != nullptr) {
    auto it = pinned_->find(pool);
    if (it != pinned_->end() && it->second->ready()) conn = it->second;
  }
  if (conn == nullptr) {
    conn = pool->Pick();
    if (pinned_ != nullptr && conn != nullptr) (*pinned_)[pool] = conn;
  }
  if (conn == nullptr) {
    // A redirection to a node we just started connecting to: wait for it within the deadline.
    if (op->redirections > 0 && pool->Connecting()) return RetryLater(op, milliseconds(5));
    return Complete(op, pool->NotReadyStatus());
  }
  op->last_node = pool->address();
  if (op->asking) conn->Send(kAsking, op->deadline, [](StatusOr<Reply>) {});
  conn->Send(op->payload, op->deadline,
             [this, op](StatusOr<Reply> r) { OnReply(op, std::move(r)); });
}

void Router::OnReply(const OpPtr& op, StatusOr<Reply> reply) {
  DAIS_DCHECK_ON_THREAD(thread_);
  if (op->batch->finished) return;
  if (!reply.ok() || !reply->is_error()) return Complete(op, std::move(reply));
  const std::string& error = reply->str;
  if (cluster_ && op->node.empty()) {
    if (auto redirect = ParseRedirect(error, HostOf(op->last_node))) {
      if (op->redirections++ >= options_.max_redirections) return Complete(op, std::move(reply));
      op->target = redirect->address;
      if (redirect->type == Redirect::Type::kMoved) {
        RedisMetrics::Get().moved.Increment();
        op->asking = false;
        map_.Assign(redirect->slot, redirect->address);
        GetOrCreatePool(redirect->address);
        Refresh();
      } else {
        RedisMetrics::Get().ask.Increment();
        op->asking = true;
      }
      return Dispatch(op);
    }
    if (error.starts_with("TRYAGAIN")) {
      if (op->redirections++ >= options_.max_redirections) return Complete(op, std::move(reply));
      return RetryLater(op, milliseconds(10));
    }
  }
  if (error.starts_with("NOSCRIPT") && !op->fallback.empty()) {
    op->payload = std::move(op->fallback);
    op->fallback.clear();
    return Dispatch(op);
  }
  Complete(op, std::move(reply));
}

void Router::RetryLater(const OpPtr& op, milliseconds delay) {
  if (Clock::now() + delay >= op->deadline) return;  // the batch deadline answers it
  auto timer = std::make_shared<asio::steady_timer>(*io_, delay);
  timer->async_wait([this, op, timer](error_code ec) {
    if (!ec && !shutting_down_) Dispatch(op);
  });
}

void Router::Complete(const OpPtr& op, StatusOr<Reply> result) {
  Batch& b = *op->batch;
  if (b.finished || b.answered[op->index]) return;
  RedisMetrics& m = RedisMetrics::Get();
  if (!result.ok()) {
    m.failed.Increment();
  } else if (result->is_error()) {
    m.error_reply.Increment();
    m.reply_errors.Increment();
  } else {
    m.ok.Increment();
  }
  b.results[op->index] = std::move(result);
  b.answered[op->index] = true;
  if (--b.remaining == 0) Finish(op->batch);
}

void Router::OnDeadline(const std::shared_ptr<Batch>& batch) {
  if (batch->finished) return;
  RedisMetrics& m = RedisMetrics::Get();
  m.timeout.Increment(static_cast<double>(batch->remaining));
  m.timeout_errors.Increment(static_cast<double>(batch->remaining));
  Finish(batch);
}

void Router::Finish(const std::shared_ptr<Batch>& batch) {
  batch->finished = true;
  if (batch->timer) batch->timer->cancel();
  live_.erase(batch.get());
  BatchCallback cb = std::move(batch->cb);
  cb(std::move(batch->results));
}

void Router::Shutdown() {
  DAIS_DCHECK_ON_THREAD(thread_);
  shutting_down_ = true;
  health_timer_.cancel();
  refresh_timer_.cancel();
  const Status why = Unavailable(kShuttingDown);
  // Connections fail their pending requests first (each op answered Unavailable), then the
  // batches still waiting (retry timers, unsent) are answered.
  std::vector<NodePool*> pools;
  for (auto& [address, pool] : pools_) pools.push_back(pool.get());
  for (NodePool* pool : pools) pool->Shutdown(why);
  std::map<Batch*, std::shared_ptr<Batch>> live = std::move(live_);
  live_.clear();
  for (auto& [raw, batch] : live) {
    if (batch->finished) continue;
    for (size_t i = 0; i < batch->results.size(); ++i) {
      if (!batch->answered[i]) batch->results[i] = why;
    }
    RedisMetrics::Get().failed.Increment(static_cast<double>(batch->remaining));
    Finish(batch);
  }
  pools_.clear();
  retired_.clear();
  UpdateReachable();
}

}  // namespace dais::redis
