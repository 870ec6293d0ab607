// Binding a listening socket, accepting and running the I/O threads, shared by the HTTP/1.1 and
// the gRPC servers (both on Asio).
#pragma once

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/thread_name.h"
#include "common/thread_sched.h"
#include "dais/status.h"
#include "frontends/connection_limit.h"
#include "frontends/endpoint.h"

namespace dais::frontends {

// Opens `acceptor` on address:port (port 0: a free one) with SO_REUSEADDR and listens.
// InvalidArgument for a malformed address, Unavailable (naming `what`, the address and the
// reason) when it cannot be bound.
inline Status Listen(boost::asio::ip::tcp::acceptor* acceptor, const std::string& address, int port,
                     std::string_view what) {
  namespace net = boost::asio;
  boost::system::error_code ec;
  auto addr = net::ip::make_address(address, ec);
  if (ec) return InvalidArgument("invalid " + std::string(what) + " address '" + address + "'");
  net::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen for " + std::string(what) + " on " + address + ":" +
                       std::to_string(port) + ": " + ec.message());
  }
  return OkStatus();
}

// The io_context the calling thread runs, when it is a listener's I/O thread (else null): work
// started from a handler can stay on the thread that received the request.
inline boost::asio::io_context*& CurrentIoContext() {
  thread_local boost::asio::io_context* current = nullptr;
  return current;
}

// Runs `ioc` until it stops; with `busy_poll`, polls (epoll without a wait) for that long after
// the last handler ran before blocking (EndpointOptions::busy_poll_us).
inline void RunIoContext(boost::asio::io_context& ioc, std::chrono::microseconds busy_poll) {
  if (busy_poll.count() <= 0) {
    ioc.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  while (!ioc.stopped()) {
    if (ioc.poll() > 0) {
      last = Clock::now();
    } else if (Clock::now() - last < busy_poll) {
      // Another runnable thread on this core (the client, on a small machine) goes first.
      std::this_thread::yield();
    } else if (ioc.run_one() > 0) {
      last = Clock::now();
    }
  }
}

// I/O threads for `configured` (0: one per core).
inline int IoThreads(int configured) {
  return configured > 0 ? configured
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The part of the HTTP and gRPC servers that is the same: a listening socket, its connection
// limiter (connection_limit.h) and accept loop, and the I/O threads, each running an io_context
// of its own.
class Listener {
 public:
  Listener() = default;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { Join(/*stop_now=*/true); }

  // Binds, starts accepting into `on_connection` (on a strand per connection when `strand`) and
  // starts the I/O threads; the bound port. `name` labels the connection metrics, `what` names
  // the listener in errors ("HTTP", "gRPC").
  StatusOr<int> Start(const EndpointOptions& options, const std::string& name,
                      std::string_view what, bool strand, AcceptLoop::OnConnection on_connection) {
    RETURN_IF_ERROR(Listen(&acceptor_, options.address, options.port, what));
    const int port = acceptor_.local_endpoint().port();
    // One io_context per I/O thread (as nginx has a worker per core): a connection lives on one
    // thread, and what its requests start there (the gateway's calls to the nodes) stays there,
    // with no wake-up of another thread in between.
    std::vector<boost::asio::io_context*> iocs = {&ioc_};
    for (int i = 1; i < IoThreads(options.threads); ++i) {
      extra_.push_back(std::make_unique<boost::asio::io_context>(1));
      iocs.push_back(extra_.back().get());
    }
    for (auto* ioc : iocs) work_.emplace_back(ioc->get_executor());
    limiter_ = std::make_unique<ConnectionLimiter>(name, options.max_connections);
    limiter_->set_max_per_address(options.max_connections_per_address);
    accept_loop_ =
        std::make_unique<AcceptLoop>(iocs, acceptor_, *limiter_, strand, std::move(on_connection));
    accept_loop_->Start();
    const std::vector<int> cpus = options.cpu_affinity ? AllowedCpus() : std::vector<int>{};
    for (size_t i = 0; i < iocs.size(); ++i) {
      const int cpu = cpus.empty() ? -1 : cpus[i % cpus.size()];
      threads_.emplace_back([ioc = iocs[i], thread_name = name + "-io" + std::to_string(i),
                             busy_poll_us = options.busy_poll_us, cpu] {
        SetThreadName(thread_name);
        if (cpu >= 0 && !BindThisThreadToCpu(cpu)) {
          LOG_WARNING("{}: cannot bind to core {}", thread_name, cpu);
        }
        CurrentIoContext() = ioc;
        RunIoContext(*ioc, std::chrono::microseconds(busy_poll_us));
      });
    }
    return port;
  }

  // The first I/O thread's io_context (the acceptor's).
  boost::asio::io_context& ioc() { return ioc_; }
  bool running() const { return !threads_.empty(); }
  // Closes the listening socket (on an I/O thread); open connections go on.
  void StopAccepting() {
    boost::asio::post(ioc_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
    });
  }
  // Lets the I/O threads return once their work is done (`stop_now`: at once) and joins them.
  void Join(bool stop_now) {
    if (threads_.empty()) return;
    work_.clear();
    if (stop_now) {
      ioc_.stop();
      for (auto& ioc : extra_) ioc->stop();
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  // Before ioc_: sessions still queued in ioc_ when it is destroyed release their slots into it.
  std::unique_ptr<ConnectionLimiter> limiter_;
  boost::asio::io_context ioc_{1};
  std::vector<std::unique_ptr<boost::asio::io_context>> extra_;  // the other threads' (each 1)
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  boost::asio::ip::tcp::acceptor acceptor_{ioc_};
  std::vector<std::thread> threads_;
  std::unique_ptr<AcceptLoop> accept_loop_;
};

}  // namespace dais::frontends
