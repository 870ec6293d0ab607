#include "redis/subscriber.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "redis/backoff.h"
#include "redis/link.h"
#include "redis/resp.h"

namespace dais::redis {

namespace asio = boost::asio;
using boost::system::error_code;

// The io_context, the thread that runs it, and the one connection. Everything but Start, Stop
// and the two atomics runs on that thread (like Connection, without locks). Stop drains the
// io_context before Impl is destroyed, so handlers may capture `this`.
class Subscriber::Impl {
 public:
  Impl(ClientOptions options, std::string channel, MessageCallback on_message,
       SubscribedCallback on_subscribed)
      : options_(std::move(options)),
        channel_(std::move(channel)),
        on_message_(std::move(on_message)),
        on_subscribed_(std::move(on_subscribed)),
        work_(asio::make_work_guard(io_)),
        health_timer_(io_),
        backoff_timer_(io_),
        backoff_(options_, Backoff::SeedFor(options_.seeds.front() + channel_)) {}

  void Start() {
    asio::post(io_, [this] { Connect(); });
    thread_ = std::thread([this] { io_.run(); });
  }

  // Not on the subscriber's thread. No callback runs after it returns.
  void Stop() {
    asio::post(io_, [this] { Shutdown(); });
    thread_.join();
  }

  std::atomic<bool> subscribed_{false};
  std::atomic<uint64_t> subscriptions_{0};

 private:
  // Dials the next seed.
  void Connect();
  // TCP is up: AUTH (when configured) and SUBSCRIBE, in one write.
  void OnConnected(const std::shared_ptr<Link>& link);
  void StartRead(const std::shared_ptr<Link>& link);
  void OnRead(const std::shared_ptr<Link>& link, size_t n);
  // Acts on one reply; an error ends the connection.
  Status Handle(const Reply& reply);
  void OnSubscribed();
  // PING every health_check_interval; fails the link when the previous one is unanswered.
  void ScheduleHealthCheck(const std::shared_ptr<Link>& link);
  void Write(std::string_view bytes);
  void Flush();
  // Drops the connection and dials the next seed after the backoff.
  void Fail(Status why);
  // Final: closes everything and lets io_.run() return.
  void Shutdown();

  const ClientOptions options_;
  const std::string channel_;
  MessageCallback on_message_;
  SubscribedCallback on_subscribed_;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer health_timer_;
  asio::steady_timer backoff_timer_;
  Backoff backoff_;
  std::shared_ptr<Link> link_;  // null while waiting in backoff and after Shutdown
  std::string address_;         // link_'s seed
  size_t attempts_ = 0;
  RespParser parser_;
  std::vector<Reply> replies_;  // scratch for OnRead
  std::string queued_;          // commands waiting for the write in flight
  bool writing_ = false;
  bool ping_outstanding_ = false;
  bool stopped_ = false;
  std::string last_error_;  // logged once until the next subscription
  std::thread thread_;
};

void Subscriber::Impl::Connect() {
  if (stopped_) return;
  address_ = options_.seeds[attempts_++ % options_.seeds.size()];
  auto link = std::make_shared<Link>(&io_);
  link_ = link;
  parser_ = RespParser();
  Dial(
      link, address_, options_,
      [this, link] {
        if (link == link_) OnConnected(link);
      },
      [this, link](Status why) {
        if (link == link_) Fail(std::move(why));
      });
}

void Subscriber::Impl::OnConnected(const std::shared_ptr<Link>& link) {
  StartRead(link);
  std::string hello;
  AppendAuth(options_, &hello);
  AppendCommand({"SUBSCRIBE", channel_}, &hello);
  Write(hello);
}

void Subscriber::Impl::StartRead(const std::shared_ptr<Link>& link) {
  link->ReadSome(asio::buffer(link->read_buf), [this, link](error_code ec, size_t n) {
    if (link != link_) return;
    if (ec) {
      return Fail(Unavailable("redis " + address_ + ": connection lost: " +
                              (ec == asio::error::eof ? "closed by server" : ec.message())));
    }
    OnRead(link, n);
  });
}

void Subscriber::Impl::OnRead(const std::shared_ptr<Link>& link, size_t n) {
  replies_.clear();
  Status parsed = parser_.Feed(std::string_view(link->read_buf.data(), n), &replies_);
  for (const Reply& reply : replies_) {
    if (Status s = Handle(reply); !s.ok()) return Fail(std::move(s));
  }
  if (!parsed.ok()) return Fail(Unavailable("redis " + address_ + ": " + parsed.message()));
  StartRead(link);
}

Status Subscriber::Impl::Handle(const Reply& r) {
  if (r.is_error()) {
    return IsAuthError(r.str) ? AuthFailed(address_, r.str)
                              : Unavailable("redis " + address_ + ": " + r.str);
  }
  if (r.type == Reply::Type::kStatus) {  // +OK to AUTH
    if (r.str == "PONG") ping_outstanding_ = false;
    return OkStatus();
  }
  if (r.type != Reply::Type::kArray || r.elements.empty() ||
      r.elements[0].type != Reply::Type::kBulk) {
    return OkStatus();
  }
  const std::string& kind = r.elements[0].str;
  if (kind == "message" && r.elements.size() == 3 && r.elements[1].str == channel_) {
    on_message_(r.elements[2].str);
  } else if (kind == "pong") {  // a PING while subscribed is answered [pong, ""]
    ping_outstanding_ = false;
  } else if (kind == "subscribe" && r.elements.size() >= 2 && r.elements[1].str == channel_) {
    OnSubscribed();
  }
  return OkStatus();
}

void Subscriber::Impl::OnSubscribed() {
  link_->Established();  // the connect deadline covered AUTH and SUBSCRIBE; it ends here
  backoff_.Reset();
  last_error_.clear();
  ping_outstanding_ = false;
  ScheduleHealthCheck(link_);
  if (subscriptions_.load() > 0) {
    LOG_INFO("redis subscriber: subscribed to {} again on {}", channel_, address_);
  }
  // The owner's resync first: whoever sees subscribed() (or the count) sees it done.
  on_subscribed_();
  subscribed_ = true;
  ++subscriptions_;
}

void Subscriber::Impl::ScheduleHealthCheck(const std::shared_ptr<Link>& link) {
  health_timer_.expires_after(options_.health_check_interval);
  health_timer_.async_wait([this, link](error_code ec) {
    if (ec || link != link_) return;
    if (ping_outstanding_) {
      return Fail(Unavailable("redis " + address_ + ": no PONG within " +
                              std::to_string(options_.health_check_interval.count()) + " ms"));
    }
    ping_outstanding_ = true;
    Write(EncodeCommand({"PING"}));
    ScheduleHealthCheck(link);
  });
}

void Subscriber::Impl::Write(std::string_view bytes) {
  queued_.append(bytes);
  Flush();
}

void Subscriber::Impl::Flush() {
  if (writing_ || queued_.empty() || !link_) return;
  writing_ = true;
  std::shared_ptr<Link> link = link_;
  link->writing.swap(queued_);
  queued_.clear();
  link->Write(asio::buffer(link->writing), [this, link](error_code ec, size_t) {
    if (link != link_) return;
    writing_ = false;
    link->writing.clear();
    if (ec) {
      return Fail(Unavailable("redis " + address_ + ": write: " + ec.message()));
    }
    Flush();
  });
}

void Subscriber::Impl::Fail(Status why) {
  if (stopped_) return;
  subscribed_ = false;
  DropLink(&link_);
  health_timer_.cancel();
  queued_.clear();
  writing_ = false;
  ping_outstanding_ = false;
  if (why.message() != last_error_) {
    LOG_WARNING("redis subscriber ({}): {}; reconnecting", channel_, why.message());
    last_error_ = std::string(why.message());
  }
  backoff_timer_.expires_after(backoff_.Next());
  backoff_timer_.async_wait([this](error_code ec) {
    if (!ec) Connect();
  });
}

void Subscriber::Impl::Shutdown() {
  stopped_ = true;
  subscribed_ = false;
  DropLink(&link_);
  health_timer_.cancel();
  backoff_timer_.cancel();
  work_.reset();  // run() returns once the closed link's handlers have drained
}

StatusOr<std::unique_ptr<Subscriber>> Subscriber::Create(ClientOptions options, std::string channel,
                                                         MessageCallback on_message,
                                                         SubscribedCallback on_subscribed) {
  RETURN_IF_ERROR(PrepareTls(&options));
  RETURN_IF_ERROR(ValidateOptions(options));
  if (channel.empty()) return InvalidArgument("redis subscriber: empty channel name");
  auto impl = std::make_unique<Impl>(std::move(options), std::move(channel), std::move(on_message),
                                     std::move(on_subscribed));
  impl->Start();
  return std::unique_ptr<Subscriber>(new Subscriber(std::move(impl)));
}

Subscriber::Subscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Subscriber::~Subscriber() { impl_->Stop(); }

bool Subscriber::subscribed() const { return impl_->subscribed_.load(); }

uint64_t Subscriber::subscriptions() const { return impl_->subscriptions_.load(); }

}  // namespace dais::redis
