// One TCP connection to one Redis node: connect with timeout, handshake (AUTH, PING), pipelined
// writes, replies matched to requests in FIFO order, reconnection with capped exponential
// backoff (jittered), and a PING health check driven by the owner. The transport (socket,
// resolve + connect under the connect deadline, AUTH) and the backoff are shared with
// Subscriber: link.h, backoff.h.
//
// Thread-safety: none. A Connection lives on one io_context run by one thread, and every method
// must be called on that thread. Owned through shared_ptr: pending asynchronous operations keep
// it alive; Shutdown() makes them finish without touching anything else.
//
// Callbacks: every ReplyCallback passed to Send is called exactly once, on the I/O thread, with
// the reply (a Redis error reply included) or Unavailable when the connection is not ready, is
// lost, or is shut down. Deadlines are the caller's business (see Client); the connection only
// uses them to detect a stuck server. Callbacks may call Send again (re-entrancy is safe).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "redis/backoff.h"
#include "redis/command.h"
#include "redis/link.h"
#include "redis/options.h"
#include "redis/resp.h"

namespace dais::redis {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Called on every change of ready() or healthy(). Not called after Shutdown().
  using StateCallback = std::function<void()>;

  static std::shared_ptr<Connection> Create(boost::asio::io_context* io, std::string address,
                                            const ClientOptions& options, StateCallback on_state);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting; on failure or loss keeps reconnecting until Shutdown().
  void Start();
  // Final: closes the socket, stops reconnecting, fails every pending request with `why`.
  void Shutdown(const Status& why);

  // Queues `payload` (exactly one encoded command) for the next
  // write; writes queued in the same I/O-thread turn go out as one write. `cb` gets the reply.
  // When not ready, `cb` gets Unavailable (posted, never called inline).
  void Send(std::string_view payload, Deadline deadline, ReplyCallback cb);

  // Health check, called periodically by the owner: drops the connection when its oldest request
  // is stuck_connection_timeout past its deadline; marks it unhealthy when the previous PING is
  // still unanswered; sends a PING (deadline now + interval).
  void HealthTick(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval);

  // Connected and handshake done: Send() writes.
  bool ready() const { return state_ == State::kReady; }
  // Ready and the last health PING was answered.
  bool healthy() const { return ready() && healthy_; }
  // The latest connect attempt is in progress (not waiting in backoff).
  bool connecting() const { return state_ == State::kConnecting || state_ == State::kHandshake; }
  // Why the connection is not ready: the last failure (OK before any); Unauthenticated when the
  // server refused the credentials.
  const Status& last_error() const { return last_error_; }
  size_t in_flight() const { return pending_.size(); }
  const std::string& address() const { return address_; }

  // Public for make_shared; use Create.
  Connection(boost::asio::io_context* io, std::string address, const ClientOptions& options,
             StateCallback on_state);

 private:
  enum class State { kIdle, kConnecting, kHandshake, kReady, kBackoff, kShutdown };
  struct Pending {
    ReplyCallback cb;
    Deadline deadline;
  };

  void Connect();
  void OnTcpConnected(const std::shared_ptr<Link>& link);
  void StartRead(const std::shared_ptr<Link>& link);
  void OnRead(const std::shared_ptr<Link>& link, size_t n);
  void Enqueue(std::string_view payload, Deadline deadline, ReplyCallback cb);
  void ScheduleFlush();
  void Flush();
  // Drops the link, fails pending with Unavailable(why), schedules a reconnect.
  void Fail(Status why);
  void SetHealthy(bool healthy);
  void Notify();

  boost::asio::io_context* io_;
  const std::string address_;
  const ClientOptions& options_;  // owned by the Client, outlives every connection
  StateCallback on_state_;

  State state_ = State::kIdle;
  std::shared_ptr<Link> link_;
  std::deque<Pending> pending_;
  std::string queued_;  // encoded commands waiting for the next write
  bool flush_scheduled_ = false;
  bool writing_ = false;
  RespParser parser_;
  std::vector<Reply> replies_;  // scratch for OnRead

  boost::asio::steady_timer backoff_timer_;
  Backoff backoff_;
  int attempts_ = 0;
  bool healthy_ = false;
  bool ping_outstanding_ = false;
  Status last_error_;
};

}  // namespace dais::redis
