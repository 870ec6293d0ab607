// The connections to one Redis node (ClientOptions::connections_per_node of them).
// Thread-safety: none; used on the Client's I/O thread only (like Connection).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"
#include "redis/connection.h"
#include "redis/options.h"

namespace dais::redis {

class NodePool {
 public:
  // `on_change` is called (on the I/O thread) whenever a connection becomes ready, is lost, or
  // changes health; never after Shutdown() or destruction. `options` must outlive the pool.
  NodePool(boost::asio::io_context* io, std::string address, const ClientOptions& options,
           std::function<void()> on_change);
  // Shutdown(Unavailable("redis node ... removed")) if not shut down yet.
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  void Start();
  // Fails every pending request of every connection with `why`; final.
  void Shutdown(const Status& why);

  // The next ready connection, round-robin; nullptr when none is ready. Valid until the current
  // I/O-thread handler returns.
  Connection* Pick();
  // At least one connection ready and healthy.
  bool Reachable() const;
  // No connection ready but one is in a connect attempt right now.
  bool Connecting() const;
  // Why nothing is ready (Unauthenticated for refused credentials, else Unavailable).
  Status NotReadyStatus() const;
  void HealthTick(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval);
  const std::string& address() const { return address_; }

 private:
  const std::string address_;
  std::vector<std::shared_ptr<Connection>> connections_;
  size_t next_ = 0;
  bool shut_down_ = false;
};

}  // namespace dais::redis
