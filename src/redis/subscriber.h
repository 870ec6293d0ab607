// Subscriber: one Redis pub/sub subscription (RESP2 SUBSCRIBE) kept alive on a thread of its
// own. Used for the feature store's cross-process L1 invalidation (features/store/invalidation.h).
//
// The Client's pipelined connections match replies to requests in order; a subscribed
// connection receives messages nobody asked for, so it is a separate, simpler connection on the
// client's transport (link.h: resolve + connect under connect_timeout, AUTH; resp.h; the
// jittered backoff of backoff.h), run by an io_context on the subscriber's thread: connect to
// the first seed that answers (cycling through them; in a Redis Cluster a classic PUBLISH
// reaches the subscribers of every node), AUTH when a password is set, SUBSCRIBE (connect_timeout
// covers the connect, AUTH and the SUBSCRIBE confirmation), then read messages. A PING every
// health_check_interval (allowed while subscribed); when one is still unanswered at the next
// tick, or the connection fails, it reconnects to the next seed after the client's backoff
// (reconnect_backoff_min doubling up to _max, ±20% jitter, back to min once subscribed).
// Messages published while the subscription was down are lost: `on_subscribed` runs after every
// successful (re)subscription, so that the owner can drop what it may have missed.
//
// Thread-safety: the callbacks run on the subscriber's thread, one at a time; they must not
// block for long and must not destroy the Subscriber. subscribed() and subscriptions() may be
// called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

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
  // Stops the thread (closes the connection); no callback runs after it returns. Must not run on
  // the subscriber's thread (i.e. not inside one of its callbacks).
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Subscribed now (the SUBSCRIBE was confirmed, on_subscribed returned, and the connection has
  // not failed since).
  bool subscribed() const;
  // Successful subscriptions so far (1 after the first, +1 per reconnection), each counted once
  // its on_subscribed returned.
  uint64_t subscriptions() const;

 private:
  class Impl;  // the io_context, its thread and the connection (subscriber.cc)
  explicit Subscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::redis
