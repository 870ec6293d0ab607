#include "redis/connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <utility>

#include "common/logging.h"
#include "redis/redis_metrics.h"

namespace dais::redis {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

std::shared_ptr<Connection> Connection::Create(asio::io_context* io, std::string address,
                                               const ClientOptions& options,
                                               StateCallback on_state) {
  return std::make_shared<Connection>(io, std::move(address), options, std::move(on_state));
}

Connection::Connection(asio::io_context* io, std::string address, const ClientOptions& options,
                       StateCallback on_state)
    : io_(io),
      address_(std::move(address)),
      options_(options),
      on_state_(std::move(on_state)),
      backoff_timer_(*io),
      backoff_(options, Backoff::SeedFor(address_)) {
  std::string host;
  uint16_t port = 0;
  if (Status s = SplitHostPort(address_, &host, &port); !s.ok()) {
    DAIS_BUG("redis connection to a malformed address: {}", s.ToString());
  }
}

void Connection::Start() {
  if (state_ == State::kIdle) Connect();
}

void Connection::Connect() {
  if (attempts_++ > 0) RedisMetrics::Get().reconnects.Increment();
  state_ = State::kConnecting;
  parser_ = RespParser();
  auto link = std::make_shared<Link>(io_);
  link_ = link;
  auto self = shared_from_this();
  // The connect deadline also covers the handshake: OnTcpConnected ends it once PING answers.
  Dial(
      link, address_, options_,
      [this, self, link] {
        if (link == link_) OnTcpConnected(link);
      },
      [this, self, link](Status why) {
        if (link != link_) return;
        RedisMetrics::Get().connect_errors.Increment();
        Fail(std::move(why));
      });
}

void Connection::OnTcpConnected(const std::shared_ptr<Link>& link) {
  state_ = State::kHandshake;
  StartRead(link);
  const Deadline deadline = Clock::now() + options_.connect_timeout;
  auto self = shared_from_this();
  // A refused AUTH or a NOAUTH answer to PING: wrong or missing credentials.
  auto auth_failed = [this](const std::string& error) {
    RedisMetrics::Get().connect_errors.Increment();
    Fail(AuthFailed(address_, error));
  };
  if (std::string auth; AppendAuth(options_, &auth)) {
    Enqueue(auth, deadline, [this, self, link, auth_failed](StatusOr<Reply> r) {
      if (link != link_ || !r.ok() || !r->is_error()) return;
      auth_failed(r->str);
    });
  }
  Enqueue(EncodeCommand({"PING"}), deadline, [this, self, link, auth_failed](StatusOr<Reply> r) {
    if (link != link_ || !r.ok()) return;
    if (r->is_error()) {
      if (IsAuthError(r->str)) return auth_failed(r->str);
      RedisMetrics::Get().connect_errors.Increment();
      return Fail(Unavailable("redis " + address_ + ": handshake PING: " + r->str));
    }
    link->Established();
    state_ = State::kReady;
    healthy_ = true;
    ping_outstanding_ = false;
    backoff_.Reset();
    if (!last_error_.ok()) LOG_INFO("redis {}: connected", address_);
    last_error_ = OkStatus();
    Notify();
  });
}

void Connection::StartRead(const std::shared_ptr<Link>& link) {
  auto self = shared_from_this();
  link->ReadSome(asio::buffer(link->read_buf), [this, self, link](error_code ec, size_t n) {
    if (link != link_) return;
    if (ec) {
      return Fail(Unavailable("redis " + address_ + ": connection lost: " +
                              (ec == asio::error::eof ? "closed by server" : ec.message())));
    }
    OnRead(link, n);
  });
}

void Connection::OnRead(const std::shared_ptr<Link>& link, size_t n) {
  replies_.clear();
  Status parsed = parser_.Feed(std::string_view(link->read_buf.data(), n), &replies_);
  std::vector<Reply> replies = std::move(replies_);
  for (Reply& reply : replies) {
    if (pending_.empty()) {
      RedisMetrics::Get().protocol_errors.Increment();
      return Fail(Unavailable("redis " + address_ + ": reply without a request"));
    }
    ReplyCallback cb = std::move(pending_.front().cb);
    pending_.pop_front();
    cb(std::move(reply));
    if (link != link_) return;  // the callback failed or shut down this connection
  }
  if (!parsed.ok()) {
    RedisMetrics::Get().protocol_errors.Increment();
    return Fail(Unavailable("redis " + address_ + ": " + parsed.message()));
  }
  StartRead(link);
}

void Connection::Send(std::string_view payload, Deadline deadline, ReplyCallback cb) {
  if (state_ != State::kReady) {
    Status why =
        last_error_.ok() ? Unavailable("redis " + address_ + ": not connected") : last_error_;
    asio::post(*io_, [cb = std::move(cb), why = std::move(why)] { cb(why); });
    return;
  }
  Enqueue(payload, deadline, std::move(cb));
}

void Connection::Enqueue(std::string_view payload, Deadline deadline, ReplyCallback cb) {
  queued_.append(payload);
  pending_.push_back(Pending{std::move(cb), deadline});
  ScheduleFlush();
}

void Connection::ScheduleFlush() {
  if (flush_scheduled_ || writing_) return;
  flush_scheduled_ = true;
  asio::post(*io_, [this, self = shared_from_this()] {
    flush_scheduled_ = false;
    Flush();
  });
}

void Connection::Flush() {
  if (writing_ || queued_.empty() || !link_ ||
      (state_ != State::kHandshake && state_ != State::kReady)) {
    return;
  }
  writing_ = true;
  std::shared_ptr<Link> link = link_;
  link->writing.swap(queued_);
  queued_.clear();
  link->Write(asio::buffer(link->writing),
              [this, self = shared_from_this(), link](error_code ec, size_t) {
                if (link != link_) return;
                writing_ = false;
                link->writing.clear();
                if (ec) {
                  return Fail(Unavailable("redis " + address_ + ": write: " + ec.message()));
                }
                Flush();
              });
}

void Connection::Fail(Status why) {
  if (state_ == State::kShutdown) return;
  const bool was_ready = state_ == State::kReady;
  if (was_ready || last_error_.ok() || last_error_.message() != why.message()) {
    LOG_WARNING("{}", why.message());
  }
  last_error_ = why;
  DropLink(&link_);
  queued_.clear();
  writing_ = false;
  healthy_ = false;
  ping_outstanding_ = false;
  state_ = State::kBackoff;

  backoff_timer_.expires_after(backoff_.Next());
  backoff_timer_.async_wait([this, self = shared_from_this()](error_code ec) {
    if (ec || state_ != State::kBackoff) return;
    Connect();
  });

  std::deque<Pending> pending = std::move(pending_);
  pending_.clear();
  const Status lost = why.code() == StatusCode::kUnavailable ? why : Unavailable(why.message());
  for (Pending& p : pending) p.cb(lost);
  if (was_ready) Notify();
}

void Connection::Shutdown(const Status& why) {
  if (state_ == State::kShutdown) return;
  state_ = State::kShutdown;
  on_state_ = nullptr;
  DropLink(&link_);
  backoff_timer_.cancel();
  queued_.clear();
  writing_ = false;
  healthy_ = false;
  std::deque<Pending> pending = std::move(pending_);
  pending_.clear();
  for (Pending& p : pending) p.cb(why);
}

void Connection::HealthTick(Clock::time_point now, std::chrono::milliseconds interval) {
  if (state_ != State::kReady) return;
  if (!pending_.empty() && now - options_.stuck_connection_timeout > pending_.front().deadline) {
    RedisMetrics::Get().timeout_errors.Increment();
    return Fail(Unavailable("redis " + address_ + ": no reply " +
                            std::to_string(options_.stuck_connection_timeout.count()) +
                            " ms past a deadline; reconnecting"));
  }
  if (ping_outstanding_) {
    SetHealthy(false);
    return;
  }
  ping_outstanding_ = true;
  Enqueue(EncodeCommand({"PING"}), now + interval,
          [this, self = shared_from_this(), link = link_](StatusOr<Reply> r) {
            if (link != link_) return;
            ping_outstanding_ = false;
            SetHealthy(r.ok() && !r->is_error());
          });
}

void Connection::SetHealthy(bool healthy) {
  if (healthy_ == healthy) return;
  healthy_ = healthy;
  Notify();
}

void Connection::Notify() {
  if (on_state_) on_state_();
}

}  // namespace dais::redis
