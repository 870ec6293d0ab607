#include "redis/subscriber.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/logging.h"
#include "redis/resp.h"

namespace dais::redis {

namespace {

using Clock = std::chrono::steady_clock;

// Closes the socket when the session ends, whichever way.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

int MillisUntil(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

}  // namespace

StatusOr<std::unique_ptr<Subscriber>> Subscriber::Create(ClientOptions options, std::string channel,
                                                         MessageCallback on_message,
                                                         SubscribedCallback on_subscribed) {
  RETURN_IF_ERROR(ValidateOptions(options));
  if (channel.empty()) return InvalidArgument("redis subscriber: empty channel name");
  std::unique_ptr<Subscriber> s(new Subscriber(std::move(options), std::move(channel),
                                               std::move(on_message), std::move(on_subscribed)));
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

Subscriber::Subscriber(ClientOptions options, std::string channel, MessageCallback on_message,
                       SubscribedCallback on_subscribed)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      on_message_(std::move(on_message)),
      on_subscribed_(std::move(on_subscribed)) {}

Subscriber::~Subscriber() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof(one));
    (void)n;
  }
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Subscriber::Run() {
  auto backoff = options_.reconnect_backoff_min;
  std::string last_error;
  for (size_t attempt = 0; !stop_; ++attempt) {
    const std::string& address = options_.seeds[attempt % options_.seeds.size()];
    const uint64_t before = subscriptions_.load();
    Status s = Session(address);
    subscribed_ = false;
    if (stop_) break;
    if (subscriptions_.load() != before) backoff = options_.reconnect_backoff_min;
    if (s.message() != last_error) {
      LOG_WARNING("redis subscriber ({}): {}; reconnecting", channel_, s.message());
      last_error = std::string(s.message());
    }
    pollfd p{wake_fd_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(backoff.count()));
    backoff = std::min(backoff * 2, options_.reconnect_backoff_max);
  }
}

Status Subscriber::Session(const std::string& address) {
  std::string host;
  uint16_t port = 0;
  RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return Unavailable("redis " + address + ": resolve: " + gai_strerror(rc));
  }
  Fd sock;
  sock.fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = sock.fd < 0 ? -1 : connect(sock.fd, res->ai_addr, res->ai_addrlen);
  const int connect_errno = errno;
  freeaddrinfo(res);
  if (sock.fd < 0) return Unavailable(std::string("socket: ") + std::strerror(connect_errno));
  const auto connect_deadline = Clock::now() + options_.connect_timeout;
  if (rc != 0) {
    if (connect_errno != EINPROGRESS) {
      return Unavailable("redis " + address + ": connect: " + std::strerror(connect_errno));
    }
    pollfd p[2] = {{sock.fd, POLLOUT, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, MillisUntil(connect_deadline)) <= 0 || (p[0].revents & POLLOUT) == 0) {
      if (stop_) return OkStatus();
      return Unavailable("redis " + address + ": connect timed out");
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Unavailable("redis " + address + ": connect: " + std::strerror(err));
  }
  int one = 1;
  setsockopt(sock.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  // Writes are a few small commands: wait for room when the socket buffer is full.
  auto write_all = [&](const std::string& bytes) -> Status {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(sock.fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        pollfd p{sock.fd, POLLOUT, 0};
        poll(&p, 1, 100);
        if (stop_) return OkStatus();
      } else {
        return Unavailable("redis " + address + ": write: " + std::strerror(errno));
      }
    }
    return OkStatus();
  };

  std::string hello;
  if (!options_.password.empty()) {
    Command auth = {"AUTH"};
    if (!options_.username.empty()) auth.push_back(options_.username);
    auth.push_back(options_.password);
    AppendCommand(auth, &hello);
  }
  AppendCommand({"SUBSCRIBE", channel_}, &hello);
  RETURN_IF_ERROR(write_all(hello));

  RespParser parser;
  std::vector<Reply> replies;
  std::vector<char> buf(64 * 1024);
  bool ping_outstanding = false;
  auto next_tick = Clock::now() + options_.health_check_interval;
  const std::string ping = EncodeCommand({"PING"});
  while (!stop_) {
    pollfd p[2] = {{sock.fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready = poll(p, 2, MillisUntil(next_tick));
    if (stop_) return OkStatus();
    if (ready < 0 && errno != EINTR) {
      return Unavailable(std::string("redis subscriber poll: ") + std::strerror(errno));
    }
    if (Clock::now() >= next_tick) {
      if (ping_outstanding) {
        return Unavailable("redis " + address + ": no PONG within " +
                           std::to_string(options_.health_check_interval.count()) + " ms");
      }
      RETURN_IF_ERROR(write_all(ping));
      ping_outstanding = true;
      next_tick = Clock::now() + options_.health_check_interval;
    }
    if (ready <= 0 || (p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    ssize_t n = recv(sock.fd, buf.data(), buf.size(), 0);
    if (n == 0) return Unavailable("redis " + address + ": connection closed by server");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return Unavailable("redis " + address + ": read: " + std::strerror(errno));
    }
    replies.clear();
    Status parsed = parser.Feed(std::string_view(buf.data(), static_cast<size_t>(n)), &replies);
    for (const Reply& r : replies) {
      if (r.type == Reply::Type::kError) {
        return Status(r.str.find("AUTH") != std::string::npos ? StatusCode::kUnauthenticated
                                                              : StatusCode::kUnavailable,
                      "redis " + address + ": " + r.str);
      }
      if (r.type == Reply::Type::kStatus) {  // +OK to AUTH, +PONG before the subscription
        if (r.str == "PONG") ping_outstanding = false;
        continue;
      }
      if (r.type != Reply::Type::kArray || r.elements.empty() ||
          r.elements[0].type != Reply::Type::kBulk) {
        continue;
      }
      const std::string& kind = r.elements[0].str;
      if (kind == "message" && r.elements.size() == 3 && r.elements[1].str == channel_) {
        on_message_(r.elements[2].str);
      } else if (kind == "pong") {
        ping_outstanding = false;
      } else if (kind == "subscribe" && r.elements.size() >= 2 && r.elements[1].str == channel_) {
        subscribed_ = true;
        ++subscriptions_;
        if (subscriptions_.load() > 1) {
          LOG_INFO("redis subscriber: subscribed to {} again on {}", channel_, address);
        }
        on_subscribed_();
      }
    }
    if (!parsed.ok()) return Unavailable("redis " + address + ": " + parsed.message());
  }
  return OkStatus();
}

}  // namespace dais::redis
