#include "gateway/upstream.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "common/mutex.h"
#include "frontends/listen.h"
#include "tls/context.h"

namespace dais::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

// One connection to a node: plain text, or HTTPS over the same TCP stream.
struct Conn {
  std::unique_ptr<beast::tcp_stream> tcp;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
  explicit operator bool() const { return tcp || tls; }
  // Calls f with the stream requests go through.
  template <class F>
  void With(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(*tcp);
    }
  }
};

}  // namespace

struct UpstreamPool::Impl {
  Impl(net::io_context* external, UpstreamOptions o)
      : options(o),
        owned(external ? nullptr : std::make_unique<net::io_context>()),
        io(external ? *external : *owned),
        work(net::make_work_guard(io)) {}

  UpstreamOptions options;
  std::unique_ptr<net::io_context> owned;
  net::io_context& io;
  net::executor_work_guard<net::io_context::executor_type> work;
  std::vector<std::thread> threads;
  Mutex mu;
  // Kept-alive connections, most recently used last (taken from the back: the warmest). One
  // idle longer than kMaxIdle is closed when its list is next touched: the node closes idle
  // connections itself after a while (120 s for dais), and such a socket only waits in
  // CLOSE_WAIT.
  static constexpr std::chrono::seconds kMaxIdle{60};
  struct Idle {
    Conn stream;
    std::chrono::steady_clock::time_point since;
  };
  // By the io_context the connection runs on (with a borrowed server's, one per I/O thread),
  // then the node's address.
  std::map<std::pair<net::io_context*, std::string>, std::deque<Idle>> idle DAIS_GUARDED_BY(mu);
  std::map<std::string, tcp::endpoint> resolved DAIS_GUARDED_BY(mu);

  static void DropStale(std::deque<Idle>& list) {
    const auto now = std::chrono::steady_clock::now();
    while (!list.empty() && now - list.front().since > kMaxIdle) list.pop_front();
  }
  // Where a request goes out: with a borrowed server's io_contexts, the one of the thread that
  // received it (no hand-off to another thread); else the pool's own.
  net::io_context& Here() {
    net::io_context* current = frontends::CurrentIoContext();
    return owned == nullptr && current != nullptr ? *current : io;
  }
  Conn TakeIdle(net::io_context* ioc, const std::string& address) {
    MutexLock l(&mu);
    auto it = idle.find({ioc, address});
    if (it == idle.end()) return {};
    DropStale(it->second);
    if (it->second.empty()) return {};
    auto s = std::move(it->second.back().stream);
    it->second.pop_back();
    return s;
  }
  void PutIdle(net::io_context* ioc, const std::string& address, Conn s) {
    MutexLock l(&mu);
    auto& list = idle[{ioc, address}];
    DropStale(list);
    if (list.size() < options.max_idle_per_address) {
      list.push_back({std::move(s), std::chrono::steady_clock::now()});
    }
  }
  // Deadlines without a timer per request (arming and cancelling one costs two timerfd_settime
  // calls per request): each io_context in use has one timer that ticks every kSweep while
  // requests are in flight on it and expires those past their deadline.
  struct Expirable {
    virtual ~Expirable() = default;
    virtual std::chrono::steady_clock::time_point deadline() const = 0;
    // Called under sweep_mu, from the sweeping thread: must only post.
    virtual void Expire() = 0;
  };
  using Watched = std::list<std::weak_ptr<Expirable>>;
  static constexpr std::chrono::milliseconds kSweep{5};
  struct Sweeper {
    explicit Sweeper(net::io_context& ioc) : timer(ioc) {}
    net::steady_timer timer;
    bool ticking = false;
    Watched live;
  };
  Mutex sweep_mu;
  std::map<net::io_context*, std::unique_ptr<Sweeper>> sweepers DAIS_GUARDED_BY(sweep_mu);

  Watched::iterator Watch(net::io_context* ioc, std::weak_ptr<Expirable> e) {
    MutexLock l(&sweep_mu);
    auto& sw = sweepers[ioc];
    if (!sw) sw = std::make_unique<Sweeper>(*ioc);
    auto it = sw->live.insert(sw->live.end(), std::move(e));
    if (!sw->ticking) {
      sw->ticking = true;
      Arm(ioc, sw.get());
    }
    return it;
  }
  void Unwatch(net::io_context* ioc, Watched::iterator it) {
    MutexLock l(&sweep_mu);
    sweepers[ioc]->live.erase(it);
  }
  void Arm(net::io_context* ioc, Sweeper* sw) DAIS_REQUIRES(sweep_mu) {
    sw->timer.expires_after(kSweep);
    sw->timer.async_wait([this, ioc](boost::system::error_code ec) {
      if (ec) return;  // the pool is going away
      MutexLock l(&sweep_mu);
      Sweeper* sw = sweepers[ioc].get();
      const auto now = std::chrono::steady_clock::now();
      for (auto it = sw->live.begin(); it != sw->live.end();) {
        auto e = it->lock();
        if (!e) {  // gone without ending (its io_context was destroyed): never unwatched
          it = sw->live.erase(it);
          continue;
        }
        if (e->deadline() <= now) e->Expire();
        ++it;
      }
      if (sw->live.empty()) {
        sw->ticking = false;
      } else {
        Arm(ioc, sw);
      }
    });
  }

  StatusOr<tcp::endpoint> Resolve(const std::string& address) {
    {
      MutexLock l(&mu);
      auto it = resolved.find(address);
      if (it != resolved.end()) return it->second;
    }
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("upstream '" + address + "': no port");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    const std::string port = address.substr(colon + 1);
    boost::system::error_code ec;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(host, port, ec);
    if (ec || results.empty()) {
      return Unavailable("upstream '" + address + "' does not resolve: " + ec.message());
    }
    MutexLock l(&mu);
    resolved[address] = results.begin()->endpoint();
    return results.begin()->endpoint();
  }
};

namespace {

// One request/answer exchange on one connection.
class Exchange : public UpstreamPool::Impl::Expirable,
                 public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(UpstreamPool::Impl* pool, net::io_context* ioc, std::string address, UpstreamRequest r,
           std::function<void(UpstreamResult)> done)
      : pool_(pool),
        ioc_(ioc),
        // The pool's own threads share an io_context: a strand. A server's I/O thread runs an
        // io_context of its own: its executor, so that the answer is handed on without a queue.
        executor_(pool->owned ? net::any_io_executor(net::make_strand(*ioc))
                              : net::any_io_executor(ioc->get_executor())),
        address_(std::move(address)),
        done_(std::move(done)),
        deadline_(r.deadline) {
    request_.method_string(r.method);
    request_.target(r.target);
    request_.version(11);
    request_.set(http::field::host, address_);
    for (auto& [k, v] : r.headers) request_.set(k, v);
    request_.keep_alive(true);
    request_.body() = std::move(r.body);
    request_.prepare_payload();
  }

  std::chrono::steady_clock::time_point deadline() const override { return deadline_; }
  void Expire() override {
    net::post(executor_, [self = shared_from_this()] {
      if (self->ended_) return;
      self->expired_ = true;  // the operation under way ends with operation_aborted
      beast::error_code ignored;
      if (self->stream_) self->stream_.lowest().socket().close(ignored);
    });
  }

  void Start() {
    watched_ = pool_->Watch(ioc_, weak_from_this());
    stream_ = pool_->TakeIdle(ioc_, address_);
    if (stream_) {
      reused_ = true;
      Write();
    } else {
      Connect();
    }
  }

 private:
  void Connect() {
    reused_ = false;
    auto endpoint = pool_->Resolve(address_);
    if (!endpoint.ok()) return Finish(endpoint.status(), true);
    stream_ = Conn();
    if (pool_->options.tls_context) {
      SSL_CTX_up_ref(pool_->options.tls_context.get());  // the Asio context owns one reference
      net::ssl::context context(pool_->options.tls_context.get());
      stream_.tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(
          beast::tcp_stream(executor_), context);
    } else {
      stream_.tcp = std::make_unique<beast::tcp_stream>(executor_);
    }
    stream_.lowest().async_connect(*endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        return self->Finish(
            self->expired_ ? DeadlineExceeded("connecting to " + self->address_ + ": timed out")
                           : Unavailable("connecting to " + self->address_ + ": " + ec.message()),
            !self->expired_);
      }
      if (self->stream_.tls) return self->Handshake();
      self->Write();
    });
  }

  // HTTPS: the client side of the handshake; the node's certificate must carry its name.
  void Handshake() {
    SSL* ssl = stream_.tls->native_handle();
    std::string name = pool_->options.tls_name;
    if (name.empty()) name = address_.substr(0, address_.rfind(':'));
    if (Status s = tls::SetPeerName(ssl, name); !s.ok()) return Finish(s, true);
    static const unsigned char kHttp11[] = "\x08http/1.1";
    SSL_set_alpn_protos(ssl, kHttp11, sizeof(kHttp11) - 1);
    stream_.tls->async_handshake(net::ssl::stream_base::client, [self = shared_from_this()](
                                                                    beast::error_code ec) {
      if (!ec) return self->Write();
      std::string why = ec.message();
      if (ec.category() == net::error::get_ssl_category()) {
        why = tls::DescribeFailure(self->stream_.tls->native_handle(),
                                   static_cast<unsigned long>(ec.value()));
      }
      self->Finish(self->expired_
                       ? DeadlineExceeded("TLS handshake with " + self->address_ + ": timed out")
                       : Unavailable("TLS handshake with " + self->address_ + ": " + why),
                   !self->expired_);
    });
  }

  void Write() {
    stream_.With([this](auto& s) {
      http::async_write(s, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec && self->reused_ && !self->expired_) {
          return self->Connect();  // the kept-alive connection had gone
        }
        if (ec) return self->Failed(ec, "sending to");
        self->Read();
      });
    });
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(pool_->options.max_response_bytes);
    stream_.With([this](auto& s) { ReadFrom(s); });
  }

  // The head first, then the body: Beast (1.74) checks a Content-Length against body_limit only
  // when the head arrives without body bytes after it (issue 32: a node's 1 GiB answer in one
  // write went through the 256 MiB limit), so the length is checked here as well.
  template <class Stream>
  void ReadFrom(Stream& s) {
    http::async_read_header(
        s, buffer_, *parser_, [self = shared_from_this(), &s](beast::error_code ec, size_t n) {
          if (ec) return self->OnAnswerRead(ec, n == 0);
          const auto length = self->parser_->content_length();
          if (length && *length > self->pool_->options.max_response_bytes) {
            return self->OnAnswerRead(http::error::body_limit, false);
          }
          http::async_read(s, self->buffer_, *self->parser_,
                           [self](beast::error_code ec, size_t) { self->OnAnswerRead(ec, false); });
        });
  }

  // `nothing`: no byte of the answer was received.
  void OnAnswerRead(beast::error_code ec, bool nothing) {
    // A kept-alive connection the node closed before reading the request (a clean end, nothing
    // received): the request was not processed, send it again. A reset may come after the node
    // took the request: no resend.
    if (ec && reused_ && nothing && !expired_ &&
        (ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::ssl::error::stream_truncated)) {
      buffer_.clear();
      return Connect();
    }
    if (ec == http::error::body_limit) {
      return Finish(Internal("the answer of " + address_ + " exceeds the limit of " +
                             std::to_string(pool_->options.max_response_bytes) + " bytes"),
                    false);
    }
    if (ec) return Failed(ec, "reading the answer of");
    // An interim 1xx answer (100 Continue, 103 Early Hints): the real one follows on the same
    // connection.
    if (parser_->get().result_int() / 100 == 1) return Read();
    Done();
  }

  void Failed(beast::error_code ec, const char* what) {
    Finish(expired_ ? DeadlineExceeded(std::string(what) + " " + address_ + ": timed out")
                    : Internal(std::string(what) + " " + address_ + ": " + ec.message()),
           false);
  }

  void Done() {
    http::response<http::string_body> r = parser_->release();
    UpstreamResult result;
    result.response.status = static_cast<int>(r.result_int());
    for (const auto& f : r) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      result.response.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    result.response.body = std::move(r.body());
    if (r.keep_alive() && buffer_.size() == 0) {
      pool_->PutIdle(ioc_, address_, std::move(stream_));
    }
    End();
    done_(std::move(result));
  }

  void Finish(Status s, bool connect_failed) {
    UpstreamResult result;
    result.status = std::move(s);
    result.connect_failed = connect_failed;
    if (stream_) {
      beast::error_code ignored;
      stream_.lowest().socket().close(ignored);
    }
    End();
    done_(std::move(result));
  }

  void End() {
    ended_ = true;
    if (watched_) pool_->Unwatch(ioc_, *watched_);
    watched_.reset();
  }

  UpstreamPool::Impl* pool_;
  net::io_context* const ioc_;
  const net::any_io_executor executor_;
  const std::string address_;
  std::function<void(UpstreamResult)> done_;
  const std::chrono::steady_clock::time_point deadline_;
  http::request<http::string_body> request_;
  Conn stream_;
  bool reused_ = false;
  bool expired_ = false;  // the deadline passed (the sweeper closed the connection)
  bool ended_ = false;
  std::optional<UpstreamPool::Impl::Watched::iterator> watched_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

}  // namespace

UpstreamPool::UpstreamPool(UpstreamOptions options)
    : impl_(std::make_unique<Impl>(nullptr, options)) {
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->io.run(); });
  }
}

UpstreamPool::UpstreamPool(net::io_context* io, UpstreamOptions options)
    : impl_(std::make_unique<Impl>(io, options)) {}

UpstreamPool::~UpstreamPool() {
  impl_->work.reset();
  if (impl_->owned) {
    impl_->io.stop();
    for (auto& t : impl_->threads) t.join();
  }
  MutexLock l(&impl_->mu);
  impl_->idle.clear();
}

net::io_context& UpstreamPool::io_context() { return impl_->io; }

void UpstreamPool::Send(const std::string& address, UpstreamRequest request,
                        std::function<void(UpstreamResult)> done) {
  net::io_context& ioc = impl_->Here();
  auto exchange =
      std::make_shared<Exchange>(impl_.get(), &ioc, address, std::move(request), std::move(done));
  // dispatch: on this io_context's own thread the request goes out at once.
  net::dispatch(ioc, [exchange] { exchange->Start(); });
}

}  // namespace dais::gateway
