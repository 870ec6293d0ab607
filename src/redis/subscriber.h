// Subscriber: one Redis pub/sub subscription (RESP2 SUBSCRIBE) kept alive on a thread of its
// own. Used for the feature store's cross-process L1 invalidation (features/invalidation.h).
//
// The Client's pipelined connections match replies to requests in order; a subscribed
// connection receives messages nobody asked for, so it is a separate, simpler connection:
// connect to the first seed that answers (cycling through them; in a Redis Cluster a classic
// PUBLISH reaches the subscribers of every node), AUTH when a password is set, SUBSCRIBE, then
// read messages. A PING every health_check_interval (allowed while subscribed); when one is still
// unanswered at the next tick, or the connection fails, it reconnects with the client's backoff.
// Messages published while the subscription was down are lost: `on_subscribed` runs after every
// successful (re)subscription, so that the owner can drop what it may have missed.
//
// Thread-safety: the callbacks run on the subscriber's thread, one at a time; they must not
// block for long and must not destroy the Subscriber. subscribed() may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "dais/status.h"
#include "redis/options.h"

namespace dais::redis {

class Subscriber {
 public:
  using MessageCallback = std::function<void(std::string_view payload)>;
  using SubscribedCallback = std::function<void()>;

  // Validates `options` (InvalidArgument) and starts the thread; does not wait for Redis.
  static StatusOr<std::unique_ptr<Subscriber>> Create(ClientOptions options, std::string channel,
                                                      MessageCallback on_message,
                                                      SubscribedCallback on_subscribed);
  // Stops the thread (closes the connection); no callback runs after it returns.
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Subscribed now (the SUBSCRIBE was confirmed and the connection has not failed since).
  bool subscribed() const { return subscribed_.load(); }
  // Successful subscriptions so far (1 after the first, +1 per reconnection).
  uint64_t subscriptions() const { return subscriptions_.load(); }

 private:
  Subscriber(ClientOptions options, std::string channel, MessageCallback on_message,
             SubscribedCallback on_subscribed);
  void Run();
  // One connection's life: returns when it fails (the reason) or on stop.
  Status Session(const std::string& address);

  const ClientOptions options_;
  const std::string channel_;
  MessageCallback on_message_;
  SubscribedCallback on_subscribed_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> subscribed_{false};
  std::atomic<uint64_t> subscriptions_{0};
  int wake_fd_ = -1;  // eventfd: the destructor wakes a waiting poll()
  std::thread thread_;
};

}  // namespace dais::redis
