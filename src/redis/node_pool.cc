#include "redis/node_pool.h"

#include <utility>

namespace dais::redis {

NodePool::NodePool(boost::asio::io_context* io, std::string address, const ClientOptions& options,
                   std::function<void()> on_change)
    : address_(std::move(address)) {
  for (int i = 0; i < options.connections_per_node; ++i) {
    connections_.push_back(Connection::Create(io, address_, options, on_change));
  }
}

NodePool::~NodePool() { Shutdown(Unavailable("redis node " + address_ + " removed")); }

void NodePool::Start() {
  for (auto& c : connections_) c->Start();
}

void NodePool::Shutdown(const Status& why) {
  if (shut_down_) return;
  shut_down_ = true;
  // Keep the connections alive while their callbacks run (a callback may destroy this pool).
  std::vector<std::shared_ptr<Connection>> connections = connections_;
  for (auto& c : connections) c->Shutdown(why);
}

Connection* NodePool::Pick() {
  const size_t n = connections_.size();
  for (size_t i = 0; i < n; ++i) {
    Connection* c = connections_[(next_ + i) % n].get();
    if (c->ready()) {
      next_ = (next_ + i + 1) % n;
      return c;
    }
  }
  return nullptr;
}

bool NodePool::Reachable() const {
  for (const auto& c : connections_) {
    if (c->healthy()) return true;
  }
  return false;
}

bool NodePool::Connecting() const {
  bool connecting = false;
  for (const auto& c : connections_) {
    if (c->ready()) return false;
    connecting = connecting || c->connecting();
  }
  return connecting;
}

Status NodePool::NotReadyStatus() const {
  for (const auto& c : connections_) {
    if (!c->last_error().ok()) return c->last_error();
  }
  return Unavailable("redis " + address_ + ": not connected yet");
}

void NodePool::HealthTick(std::chrono::steady_clock::time_point now,
                          std::chrono::milliseconds interval) {
  std::vector<std::shared_ptr<Connection>> connections = connections_;
  for (auto& c : connections) c->HealthTick(now, interval);
}

}  // namespace dais::redis
