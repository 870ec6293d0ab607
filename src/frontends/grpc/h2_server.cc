#include "frontends/grpc/h2_server.h"

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "frontends/connection_limit.h"
#include "frontends/listen.h"
#include "metrics/registry.h"
#include "tls/engine.h"

namespace dais::frontends::grpc {

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

// The answer to plain HTTP on the gRPC port with TLS (in plain text: the client speaks it).
std::string PlainHttpOnTlsAnswer() {
  const std::string body = "this port speaks gRPC over TLS; use https / a TLS channel\n";
  return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

class Session;

struct Registry {
  Mutex mu;
  std::unordered_set<std::shared_ptr<Session>> sessions DAIS_GUARDED_BY(mu);
  // I/O threads running one of this server's handlers now, and calls open over all
  // connections. At light load (no I/O thread running, at most kInlineCalls calls open) an answer
  // completed on another thread (a model's) is written from that thread instead of waking an I/O
  // thread. Not at higher load: the model's thread would end up writing every answer itself
  // while the I/O threads idle (measured: mlp_small at concurrency 16 and 64 fell from ~60k to
  // ~42k req/s in some runs).
  std::atomic<int> busy{0};
  std::atomic<int> open_calls{0};
};

constexpr int kInlineCalls = 2;

// dais_grpc_* in the global registry (docs/metrics.md).
struct GrpcMetrics {
  metrics::Gauge& connections;
  metrics::Gauge& calls;
  metrics::Counter& not_http2;
  metrics::Counter& protocol_errors;
  metrics::Counter& keepalive_timeouts;

  static GrpcMetrics& Get() {
    static GrpcMetrics* m = [] {
      auto& r = metrics::Registry::Global();
      auto& closed = r.AddCounter("dais_grpc_connections_closed_total",
                                  "gRPC connections closed by the server, by reason", {"reason"});
      return new GrpcMetrics{
          r.AddGauge("dais_grpc_connections", "Open gRPC (HTTP/2) connections", {}).Get({}),
          r.AddGauge("dais_grpc_calls", "gRPC calls open (HTTP/2 streams)", {}).Get({}),
          closed.Get({"not_http2"}),
          closed.Get({"protocol_error"}),
          closed.Get({"keepalive_timeout"}),
      };
    }();
    return *m;
  }
};

class BusyScope {
 public:
  explicit BusyScope(Registry* r) : r_(r) { r_->busy.fetch_add(1, std::memory_order_relaxed); }
  ~BusyScope() { r_->busy.fetch_sub(1, std::memory_order_relaxed); }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  Registry* r_;
};

// One connection. Its state (the H2Connection, the write buffers, the flags) is guarded by mu_;
// the thread holding mu_ is recorded in owner_. Work from other threads (answers, Shutdown,
// Close) goes through Run, which keeps it in call order.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const MethodTable* methods, const H2ServerOptions& options,
          Registry* registry, std::unique_ptr<frontends::ConnectionLimiter::Slot> slot)
      : socket_(std::move(socket)),
        keepalive_(socket_.get_executor()),
        rate_timer_(socket_.get_executor()),
        handshake_timer_(socket_.get_executor()),
        methods_(methods),
        options_(options),
        registry_(registry),
        slot_(std::move(slot)) {}

  // On the I/O thread that accepted the connection.
  void Start() {
    Locked locked(this);
    Begin();
  }

  // From any thread.
  void Shutdown() {
    Run([this] {
      if (conn_ && !closed_) conn_->Shutdown();
    });
  }
  void Close() {
    Run([this] { CloseNow(); });
  }

 private:
  // Holds mu_ and marks this thread as its owner for the scope; at the end runs the work queued
  // meanwhile and writes out what the connection produced.
  class Locked {
   public:
    explicit Locked(Session* s) : s_(s), lock_(s->mu_) {
      s_->owner_.store(std::this_thread::get_id());
    }
    Locked(Session* s, std::adopt_lock_t) : s_(s), lock_(s->mu_, std::adopt_lock) {
      s_->owner_.store(std::this_thread::get_id());
    }
    ~Locked() {
      s_->Drain();
      s_->Flush();
      s_->CountOpenCalls();
      s_->owner_.store(std::thread::id());
    }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    Session* s_;
    std::unique_lock<std::mutex> lock_;
  };

  // Runs `fn` with the connection to itself, after the work queued before it. From inside this
  // session's own handler: at the handler's end. From another thread: at once on that thread
  // when no I/O thread is running and the session is free (no wake-up of an I/O thread for an
  // answer), otherwise on an I/O thread.
  void Run(std::function<void()> fn) {
    bool schedule = false;
    {
      MutexLock lock(&ops_mu_);
      ops_.push_back(std::move(fn));
      if (owner_.load() == std::this_thread::get_id()) return;
      if (!drain_scheduled_) schedule = drain_scheduled_ = true;
    }
    if (registry_->busy.load(std::memory_order_relaxed) == 0 &&
        registry_->open_calls.load(std::memory_order_relaxed) <= kInlineCalls && mu_.try_lock()) {
      Locked locked(this, std::adopt_lock);
      return;
    }
    if (schedule) {
      net::post(socket_.get_executor(), [self = shared_from_this()] {
        BusyScope busy(self->registry_);
        Locked locked(self.get());
      });
    }
  }

  // Brings the registry's count of open calls up to date with this connection's. mu_ held.
  void CountOpenCalls() {
    const int open = conn_ && !closed_ ? static_cast<int>(conn_->open_calls()) : 0;
    // Without open calls the connection may be closed to make room at the connection limit; so
    // may one whose calls are all still receiving their requests, the slowest first (issue 32).
    const SlotState state = closed_ || !conn_      ? SlotState::kBusy
                            : open == 0            ? SlotState::kIdle
                            : conn_->AllArriving() ? SlotState::kReceiving
                                                   : SlotState::kBusy;
    if (state != slot_state_) {
      if (!closer_set_) {  // once: no allocation per call
        closer_set_ = true;
        slot_->SetCloser([weak = weak_from_this()] {
          if (auto self = weak.lock()) self->Close();
        });
      }
      if (state == SlotState::kIdle) {
        slot_->Idle();
      } else if (state == SlotState::kReceiving) {
        slot_->Receiving();
      } else {
        slot_->Busy();
      }
      slot_state_ = state;
    }
    if (!closed_ && conn_ && !rate_timer_armed_ && options_.min_request_bytes_per_sec > 0 &&
        conn_->AnyArriving()) {
      ArmRateCheck();
    }
    if (open != counted_calls_) {
      registry_->open_calls.fetch_add(open - counted_calls_, std::memory_order_relaxed);
      GrpcMetrics::Get().calls.Add(open - counted_calls_);
      counted_calls_ = open;
    }
  }

  // Runs the queued work. mu_ held.
  void Drain() {
    for (;;) {
      std::vector<std::function<void()>> ops;
      {
        MutexLock lock(&ops_mu_);
        if (ops_.empty()) {
          drain_scheduled_ = false;
          return;
        }
        ops.swap(ops_);
      }
      for (auto& op : ops) op();
    }
  }

  void Begin() {
    GrpcMetrics::Get().connections.Add(1);
    counted_connection_ = true;
    std::weak_ptr<Session> weak = weak_from_this();
    conn_ = std::make_shared<H2Connection>(methods_, options_.h2, [weak](std::function<void()> fn) {
      if (auto self = weak.lock()) self->Run(std::move(fn));
    });
    if (Status s = conn_->Start(); !s.ok()) {
      LOG_ERROR("gRPC connection: {}", s.message());
      return CloseNow();
    }
    if (options_.tls && !StartTls()) return CloseNow();
    // The server's SETTINGS go out with the first answer to the client's bytes, so that an
    // HTTP/1.1 client gets a clean HTTP/1.1 error rather than HTTP/2 frames.
    first_read_ = true;
    Read();
    ArmKeepalive();
  }

  void Read() {
    socket_.async_read_some(
        net::buffer(rbuf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
          BusyScope busy(self->registry_);
          Locked locked(self.get());
          if (ec || self->closed_) return self->CloseNow();
          if (self->slot_state_ == SlotState::kReceiving) {
            self->slot_->Progress(n);
          }
          const uint8_t* data = self->rbuf_.data();
          if (self->tls_) {
            if (self->handshaking_ && !self->heard_) {
              self->heard_ = true;
              self->handshake_->Heard();
              self->ArmHandshakeTimer(self->options_.tls->config().handshake_timeout_ms, false);
            }
            if (!self->Decrypt(n)) return;
            if (self->plain_.empty()) return self->Read();
            data = reinterpret_cast<const uint8_t*>(self->plain_.data());
            n = self->plain_.size();
          }
          self->OnPlain(data, n);
        });
  }

  // HTTP/2 bytes received (decrypted, with TLS). mu_ held.
  void OnPlain(const uint8_t* data, size_t n) {
    const bool first = std::exchange(first_read_, false);
    Status s = conn_->Receive(data, n);
    if (s.ok()) return Read();
    if (first && !tls_ && n > 0 && data[0] == 0x16) {  // a TLS ClientHello: no answer it can read
      tls::CountTlsOnPlainPort("grpc");
      LOG_INFO(
          "gRPC connection from {}: a TLS client on the plain-text gRPC port (start the "
          "server with --grpc-use-ssl, or connect without TLS); closing",
          Peer());
    } else if (conn_->not_http2()) {
      Emit(NotHttp2Answer());
      GrpcMetrics::Get().not_http2.Increment();
    } else {
      GrpcMetrics::Get().protocol_errors.Increment();
      LOG_VERBOSE(1, "gRPC connection from {}: {}", Peer(), s.message());
      std::string goaway;
      conn_->TakeOutput(&goaway);  // nghttp2's GOAWAY naming the error
      Emit(goaway);
    }
    closing_ = true;
  }

  // Plaintext for the peer: into pending_, encrypted with TLS. mu_ held.
  void Emit(std::string_view plain) {
    if (!tls_) return (void)pending_.append(plain);
    if (Status s = tls_->Send(plain, &pending_); !s.ok()) {
      LOG_VERBOSE(1, "gRPC connection from {}: {}", Peer(), s.message());
      closing_ = true;
    }
  }

  // Starts the server side of a TLS handshake; false when at the handshake limit (none of the
  // running ones silent: tls/context.h). The client's first byte must come within
  // FirstByteTimeoutMs, the rest of the handshake within handshake_timeout_ms. mu_ held.
  bool StartTls() {
    handshake_ = options_.tls->BeginHandshake([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Close();
    });
    if (!handshake_) return false;
    handshaking_ = true;
    tls_ = std::make_unique<tls::Engine>(options_.tls->Current(), /*server=*/true);
    ArmHandshakeTimer(options_.tls->FirstByteTimeoutMs(), /*silent=*/true);
    return true;
  }

  void ArmHandshakeTimer(int ms, bool silent) {
    handshake_timer_.expires_after(std::chrono::milliseconds(ms));
    handshake_timer_.async_wait(
        [self = shared_from_this(), ms, silent](boost::system::error_code ec) {
          if (ec) return;
          BusyScope busy(self->registry_);
          Locked locked(self.get());
          if (!self->handshaking_ || self->closed_) return;
          if (silent) {
            self->TlsFailed("silent_timeout", "no byte within " + std::to_string(ms) + " ms");
          } else {
            self->TlsFailed("timeout", "not finished within " + std::to_string(ms) + " ms");
          }
          self->CloseNow();
        });
  }

  // Decrypts the `n` bytes read into plain_ (handshake answers go to pending_). False: the
  // connection is closing. mu_ held.
  bool Decrypt(size_t n) {
    plain_.clear();
    Status s = tls_->Receive(rbuf_.data(), n, &plain_, &pending_);
    if (tls_->TakeJustEstablished()) {
      handshaking_ = false;
      handshake_timer_.cancel();
      handshake_->Done();
    }
    if (s.ok() && !tls_->peer_closed()) return true;
    if (!s.ok()) {
      if (tls_->failure_reason() == "http_request") pending_ += PlainHttpOnTlsAnswer();
      if (handshaking_) {
        TlsFailed(tls_->failure_reason(), tls_->failure_detail());
      } else {
        LOG_VERBOSE(1, "gRPC connection from {}: {}", Peer(), s.message());
      }
    }
    closing_ = true;
    return false;
  }

  // Ends a handshake that failed: counted by reason and logged. mu_ held.
  void TlsFailed(std::string_view reason, const std::string& detail) {
    if (!std::exchange(handshaking_, false)) return;
    handshake_timer_.cancel();
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    handshake_->Failed(reason, ec ? "?" : ep.address().to_string(), detail);
  }

  // Writes what is pending: first straight from this thread (non-blocking), the rest, if the
  // socket does not take it all, asynchronously. mu_ held.
  void Flush() {
    if (closed_ || !conn_) return;
    if (!closing_ && !first_read_) {
      if (tls_) {
        std::string plain;
        conn_->TakeOutput(&plain);
        if (!plain.empty()) Emit(plain);
      } else {
        conn_->TakeOutput(&pending_);
      }
    }
    if (!writing_ && !pending_.empty()) {
      ssize_t n = ::send(socket_.native_handle(), pending_.data(), pending_.size(),
                         MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return CloseNow();
        n = 0;
      }
      if (static_cast<size_t>(n) == pending_.size()) {
        pending_.clear();
      } else {
        writing_ = true;
        wbuf_.assign(pending_, static_cast<size_t>(n));
        pending_.clear();
        net::async_write(socket_, net::buffer(wbuf_),
                         [self = shared_from_this()](boost::system::error_code ec, size_t) {
                           BusyScope busy(self->registry_);
                           Locked locked(self.get());
                           self->writing_ = false;
                           self->wbuf_.clear();
                           if (ec) self->CloseNow();
                         });
        return;
      }
    }
    if (!writing_ && pending_.empty() && (closing_ || conn_->Done())) CloseNow();
  }

  // Once a second while a request is arriving: cancels those slower than the minimum rate.
  void ArmRateCheck() {
    rate_timer_armed_ = true;
    rate_timer_.expires_after(std::chrono::seconds(1));
    rate_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      BusyScope busy(self->registry_);
      Locked locked(self.get());
      self->rate_timer_armed_ = false;
      if (self->closed_ || !self->conn_) return;
      const int slow = self->conn_->EnforceMinRate(self->options_.min_request_bytes_per_sec,
                                                   self->options_.min_request_rate_grace_secs);
      if (slow < 0) {
        self->slot_->CountSlow();
        LOG_VERBOSE(1, "gRPC connection from {}: a header block never completed; closing",
                    self->Peer());
        return self->CloseNow();
      }
      for (int i = 0; i < slow; ++i) self->slot_->CountSlow();
      if (slow > 0) {
        LOG_VERBOSE(1,
                    "gRPC connection from {}: {} call(s) cancelled: requests arrived slower "
                    "than {} bytes/s",
                    self->Peer(), slow, self->options_.min_request_bytes_per_sec);
      }
    });
  }

  void ArmKeepalive() {
    if (options_.keepalive_time_ms <= 0 || closed_) return;
    WaitKeepalive(options_.keepalive_time_ms);
  }

  void WaitKeepalive(int ms) {
    keepalive_.expires_after(std::chrono::milliseconds(ms));
    keepalive_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      BusyScope busy(self->registry_);
      Locked locked(self.get());
      if (!self->closed_) self->OnKeepalive();
    });
  }

  void OnKeepalive() {
    if (awaiting_ack_ && !conn_->PingAcked()) {
      LOG_INFO("gRPC connection from {}: keepalive PING not answered within {} ms; closing", Peer(),
               options_.keepalive_timeout_ms);
      GrpcMetrics::Get().keepalive_timeouts.Increment();
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
      return WaitKeepalive(options_.keepalive_timeout_ms);
    }
    ArmKeepalive();
  }

  // mu_ held.
  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    if (std::exchange(counted_connection_, false)) GrpcMetrics::Get().connections.Add(-1);
    if (handshaking_) TlsFailed("closed", "the connection closed during the handshake");
    if (conn_) conn_->Abort();
    boost::system::error_code ec;
    keepalive_.cancel();
    rate_timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    MutexLock lock(&registry_->mu);
    registry_->sessions.erase(shared_from_this());
  }

  std::string Peer() const {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    return ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  std::mutex mu_;
  std::atomic<std::thread::id> owner_{};
  Mutex ops_mu_;
  std::vector<std::function<void()>> ops_ DAIS_GUARDED_BY(ops_mu_);
  bool drain_scheduled_ DAIS_GUARDED_BY(ops_mu_) = false;
  // Guarded by mu_:
  tcp::socket socket_;
  net::steady_timer keepalive_;
  net::steady_timer rate_timer_;  // ArmRateCheck
  bool rate_timer_armed_ = false;
  net::steady_timer handshake_timer_;
  const MethodTable* methods_;
  const H2ServerOptions& options_;
  Registry* registry_;
  std::shared_ptr<H2Connection> conn_;
  std::array<uint8_t, 64 * 1024> rbuf_;
  std::string wbuf_;                  // being written asynchronously
  std::string pending_;               // to write next (encrypted, with TLS)
  std::unique_ptr<tls::Engine> tls_;  // with TLS
  std::string plain_;                 // the last read, decrypted
  bool handshaking_ = false;          // a TLS handshake is running (counted in the context)
  bool heard_ = false;                // its first byte came
  std::unique_ptr<tls::ServerContext::Handshake> handshake_;  // its slot
  bool writing_ = false;
  bool first_read_ = false;  // nothing read yet: the SETTINGS wait (see Begin)
  bool closing_ = false;     // protocol error: write what is pending, then close
  bool closed_ = false;
  bool awaiting_ack_ = false;
  int pings_without_data_ = 0;
  std::unique_ptr<frontends::ConnectionLimiter::Slot> slot_;
  enum class SlotState { kBusy, kIdle, kReceiving };
  SlotState slot_state_ = SlotState::kBusy;  // what slot_ was last told
  bool closer_set_ = false;                  // slot_->SetCloser called
  int counted_calls_ = 0;                    // this connection's share of registry_->open_calls
  bool counted_connection_ = false;          // in dais_grpc_connections
};

}  // namespace

struct H2Server::Impl {
  H2ServerOptions options;
  MethodTable methods;
  Registry registry;  // before the listener: sessions queued in its io_context point to it
  frontends::Listener listener;

  void OnConnection(tcp::socket s, std::unique_ptr<frontends::ConnectionLimiter::Slot> slot) {
    auto session =
        std::make_shared<Session>(std::move(s), &methods, options, &registry, std::move(slot));
    {
      MutexLock lock(&registry.mu);
      registry.sessions.insert(session);
    }
    session->Start();
  }

  std::vector<std::shared_ptr<Session>> Sessions() {
    MutexLock lock(&registry.mu);
    return {registry.sessions.begin(), registry.sessions.end()};
  }
};

H2Server::H2Server(H2ServerOptions options, MethodTable methods) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->methods = std::move(methods);
}

H2Server::~H2Server() { Stop(0); }

Status H2Server::Start() {
  Impl* impl = impl_.get();
  ASSIGN_OR_RETURN(port_, impl->listener.Start(impl->options, "grpc", "gRPC", /*strand=*/false,
                                               [impl](tcp::socket s, auto slot) {
                                                 impl->OnConnection(std::move(s), std::move(slot));
                                               }));
  return OkStatus();
}

void H2Server::Stop(int deadline_ms) {
  if (!impl_ || !impl_->listener.running()) return;
  impl_->listener.StopAccepting();
  for (auto& s : impl_->Sessions()) s->Shutdown();
  auto wait_closed = [this](std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
      {
        MutexLock lock(&impl_->registry.mu);
        if (impl_->registry.sessions.empty()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_closed(std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms));
  for (auto& s : impl_->Sessions()) s->Close();
  // The closes run on the I/O threads: no call starts after before_join.
  wait_closed(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  if (impl_->options.before_join) impl_->options.before_join();
  impl_->listener.Join(/*stop_now=*/false);
}

}  // namespace dais::frontends::grpc
