#include "frontends/grpc/h2_server.h"

#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/logging.h"
#include "frontends/listen.h"

namespace dais::grpcfe {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// The answer to an HTTP/1.x request on the gRPC port.
std::string NotHttp2Answer() {
  const std::string body =
      "this port speaks gRPC (HTTP/2); for HTTP/1.1 (KServe v2 REST) use the server's HTTP "
      "port\n";
  return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

class Session;

struct Registry {
  std::mutex mu;
  std::unordered_set<std::shared_ptr<Session>> sessions;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const MethodTable* methods, const H2ServerOptions& options,
          Registry* registry)
      : socket_(std::move(socket)),
        keepalive_(socket_.get_executor()),
        methods_(methods),
        options_(options),
        registry_(registry) {}

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->Begin(); });
  }

  // From any thread.
  void Shutdown() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->conn_ && !self->closed_) {
        self->conn_->Shutdown();
        self->Flush();
      }
    });
  }
  void Close() {
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
  }

 private:
  void Begin() {
    std::weak_ptr<Session> weak = weak_from_this();
    auto executor = socket_.get_executor();
    conn_ = std::make_shared<H2Connection>(
        methods_, options_.h2,
        [executor](std::function<void()> fn) { net::post(executor, std::move(fn)); },
        [weak] {
          if (auto self = weak.lock()) self->Flush();
        });
    if (Status s = conn_->Start(); !s.ok()) {
      LOG_ERROR("gRPC connection: {}", s.message());
      return CloseNow();
    }
    // The server's SETTINGS go out with the first answer to the client's bytes, so that an
    // HTTP/1.1 client gets a clean HTTP/1.1 error rather than HTTP/2 frames.
    Read();
    ArmKeepalive();
  }

  void Read() {
    socket_.async_read_some(
        net::buffer(rbuf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
          if (ec || self->closed_) return self->CloseNow();
          Status s = self->conn_->Receive(self->rbuf_.data(), n);
          if (!s.ok()) {
            if (H2Connection::IsNotHttp2(s)) {
              self->pending_ = NotHttp2Answer();
            } else {
              LOG_VERBOSE(1, "gRPC connection from {}: {}", self->Peer(), s.message());
              self->conn_->TakeOutput(&self->pending_);  // nghttp2's GOAWAY naming the error
            }
            self->closing_ = true;
          }
          self->Flush();
          if (!self->closing_) self->Read();
        });
  }

  void Flush() {
    if (closed_) return;
    if (!closing_) conn_->TakeOutput(&pending_);
    if (!writing_ && !pending_.empty()) {
      writing_ = true;
      wbuf_.swap(pending_);
      pending_.clear();
      net::async_write(socket_, net::buffer(wbuf_),
                       [self = shared_from_this()](boost::system::error_code ec, size_t) {
                         self->writing_ = false;
                         self->wbuf_.clear();
                         if (ec) return self->CloseNow();
                         self->Flush();
                       });
      return;
    }
    if (!writing_ && (closing_ || conn_->Done())) CloseNow();
  }

  void ArmKeepalive() {
    if (options_.keepalive_time_ms <= 0 || closed_) return;
    keepalive_.expires_after(std::chrono::milliseconds(options_.keepalive_time_ms));
    keepalive_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->closed_) return;
      self->OnKeepalive();
    });
  }

  void OnKeepalive() {
    if (awaiting_ack_ && !conn_->PingAcked()) {
      LOG_INFO("gRPC connection from {}: keepalive PING not answered within {} ms; closing", Peer(),
               options_.keepalive_timeout_ms);
      return CloseNow();
    }
    if (awaiting_ack_) {  // answered: the next PING after another keepalive time
      awaiting_ack_ = false;
      return ArmKeepalive();
    }
    if (conn_->TakeDataSent()) pings_without_data_ = 0;
    const bool calls = conn_->open_calls() > 0;
    const bool allowed = options_.max_pings_without_data <= 0 ||
                         pings_without_data_ < options_.max_pings_without_data;
    if ((calls || options_.keepalive_permit_without_calls) && allowed) {
      conn_->SendPing();
      ++pings_without_data_;
      awaiting_ack_ = true;
      Flush();
      keepalive_.expires_after(std::chrono::milliseconds(options_.keepalive_timeout_ms));
      keepalive_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec || self->closed_) return;
        self->OnKeepalive();
      });
      return;
    }
    ArmKeepalive();
  }

  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    if (conn_) conn_->Abort();
    boost::system::error_code ec;
    keepalive_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    std::lock_guard<std::mutex> lock(registry_->mu);
    registry_->sessions.erase(shared_from_this());
  }

  std::string Peer() const {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    return ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  tcp::socket socket_;
  net::steady_timer keepalive_;
  const MethodTable* methods_;
  const H2ServerOptions& options_;
  Registry* registry_;
  std::shared_ptr<H2Connection> conn_;
  std::array<uint8_t, 64 * 1024> rbuf_;
  std::string wbuf_;     // being written
  std::string pending_;  // to write next
  bool writing_ = false;
  bool closing_ = false;  // protocol error: write what is pending, then close
  bool closed_ = false;
  bool awaiting_ack_ = false;
  int pings_without_data_ = 0;
};

}  // namespace

struct H2Server::Impl {
  H2ServerOptions options;
  MethodTable methods;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  Registry registry;

  void Accept() {
    acceptor.async_accept(
        net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket s) {
          if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
          if (!ec) {
            s.set_option(tcp::no_delay(true), ec);
            auto session = std::make_shared<Session>(std::move(s), &methods, options, &registry);
            {
              std::lock_guard<std::mutex> lock(registry.mu);
              registry.sessions.insert(session);
            }
            session->Start();
          }
          Accept();
        });
  }

  std::vector<std::shared_ptr<Session>> Sessions() {
    std::lock_guard<std::mutex> lock(registry.mu);
    return {registry.sessions.begin(), registry.sessions.end()};
  }
};

H2Server::H2Server(H2ServerOptions options, MethodTable methods) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->methods = std::move(methods);
}

H2Server::~H2Server() { Stop(0); }

Status H2Server::Start() {
  RETURN_IF_ERROR(
      frontends::Listen(&impl_->acceptor, impl_->options.address, impl_->options.port, "gRPC"));
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->work.emplace(impl_->ioc.get_executor());
  impl_->Accept();
  for (int i = 0; i < frontends::IoThreads(impl_->options.threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
  }
  return OkStatus();
}

void H2Server::Stop(int deadline_ms) {
  if (!impl_ || impl_->threads.empty()) return;
  net::post(impl_->ioc, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
  });
  for (auto& s : impl_->Sessions()) s->Shutdown();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(impl_->registry.mu);
      if (impl_->registry.sessions.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& s : impl_->Sessions()) s->Close();
  impl_->work.reset();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace dais::grpcfe
