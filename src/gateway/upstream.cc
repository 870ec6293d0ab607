#include "gateway/upstream.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <charconv>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "common/ascii.h"
#include "common/mutex.h"
#include "frontends/listen.h"
#include "frontends/write_now.h"
#include "gateway/http1_response.h"
#include "tls/context.h"

namespace dais::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Sockets on an io_context's own executor (not the type-erased any_io_executor): every
// connection's handlers run on the one thread that runs its io_context.
using Executor = net::io_context::executor_type;
using Socket = net::basic_stream_socket<tcp, Executor>;
using TlsStream = net::ssl::stream<Socket>;

constexpr size_t kReadBytes = 32 * 1024;

// One connection to a node, plain text or HTTPS, with what its requests reuse: the buffer a
// request head is written into, the read buffer and the answer parser.
struct Conn {
  std::unique_ptr<Socket> tcp;
  std::unique_ptr<TlsStream> tls;
  std::string head;
  std::unique_ptr<char[]> in;
  std::unique_ptr<Http1ResponseParser> parser;

  Socket& lowest() { return tls ? tls->next_layer() : *tcp; }
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

// Names the gateway writes itself (or that would frame the request differently).
bool Framing(std::string_view name) {
  return EqualsIgnoreCase(name, "host") || EqualsIgnoreCase(name, "content-length") ||
         EqualsIgnoreCase(name, "transfer-encoding") || EqualsIgnoreCase(name, "connection");
}

}  // namespace

struct UpstreamPool::Impl {
  Impl(net::io_context* external, UpstreamOptions o) : options(o), io(external) {
    if (external != nullptr) {
      work.push_back(net::make_work_guard(*external));
      return;
    }
    // Own threads: an io_context each (as the listener's), requests spread over them.
    for (int i = 0; i < std::max(1, options.threads); ++i) {
      owned.push_back(std::make_unique<net::io_context>(1));
      work.push_back(net::make_work_guard(*owned.back()));
    }
    io = owned.front().get();
  }

  UpstreamOptions options;
  std::vector<std::unique_ptr<net::io_context>> owned;
  net::io_context* io;  // the borrowed one, or the first of the pool's own
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  std::atomic<size_t> next_owned{0};
  std::vector<std::thread> threads;
  // Kept-alive connections, most recently used last (taken from the back: the warmest). One
  // idle longer than kMaxIdle is closed when its list is next touched: the node closes idle
  // connections itself after a while (120 s for dais), and such a socket only waits in
  // CLOSE_WAIT.
  static constexpr std::chrono::seconds kMaxIdle{60};
  struct Idle {
    Conn stream;
    std::chrono::steady_clock::time_point since;
  };
  // Deadlines without a timer per request (arming and cancelling one costs two timerfd_settime
  // calls per request): each io_context in use has one timer that ticks every kSweep while
  // requests are in flight on it and expires those past their deadline.
  struct Expirable {
    virtual ~Expirable() = default;
    virtual std::chrono::steady_clock::time_point deadline() const = 0;
    // Called by the sweep, on the io_context's thread.
    virtual void Expire() = 0;
  };
  using Watched = std::list<std::weak_ptr<Expirable>>;
  static constexpr std::chrono::milliseconds kSweep{5};
  struct Sweeper {
    explicit Sweeper(net::io_context& ioc) : timer(ioc) {}
    net::steady_timer timer;
    bool ticking = false;
    Watched live;
    Watched spare;  // nodes of ended exchanges, reused (no list node allocated per request)
  };
  // What the exchanges of one io_context share: its idle connections by node address and its
  // sweeper. Touched only on that io_context's thread (exchanges start there and run there), so
  // without a lock; found through a per-thread cache (Local).
  struct PerIo {
    std::map<std::string, std::deque<Idle>, std::less<>> idle;
    std::unique_ptr<Sweeper> sweeper;
  };
  // Never reused, so that a thread's cache cannot mistake a new pool for a destroyed one.
  const uint64_t id = [] {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }();
  Mutex mu;
  std::map<net::io_context*, std::unique_ptr<PerIo>> per_io DAIS_GUARDED_BY(mu);
  std::map<std::string, tcp::endpoint> resolved DAIS_GUARDED_BY(mu);

  // The state of `ioc`; called on ioc's thread.
  PerIo& Local(net::io_context* ioc) {
    struct Cached {
      uint64_t pool = 0;
      net::io_context* ioc = nullptr;
      PerIo* state = nullptr;
    };
    thread_local std::array<Cached, 4> cache;
    thread_local size_t next_slot = 0;
    for (const Cached& c : cache) {
      if (c.pool == id && c.ioc == ioc) return *c.state;
    }
    PerIo* state;
    {
      MutexLock l(&mu);
      auto& p = per_io[ioc];
      if (!p) p = std::make_unique<PerIo>();
      state = p.get();
    }
    cache[next_slot++ % cache.size()] = {id, ioc, state};
    return *state;
  }

  static void DropStale(std::deque<Idle>& list) {
    const auto now = std::chrono::steady_clock::now();
    while (!list.empty() && now - list.front().since > kMaxIdle) list.pop_front();
  }
  // Where a request goes out: with a borrowed server's io_contexts, the one of the thread that
  // received it (no hand-off to another thread); else the pool's own.
  net::io_context& Here() {
    if (!owned.empty()) return *owned[next_owned.fetch_add(1) % owned.size()];
    net::io_context* current = frontends::CurrentIoContext();
    return current != nullptr ? *current : *io;
  }
  Conn TakeIdle(net::io_context* ioc, const std::string& address) {
    auto& idle = Local(ioc).idle;
    auto it = idle.find(address);
    if (it == idle.end()) return {};
    DropStale(it->second);
    if (it->second.empty()) return {};
    auto s = std::move(it->second.back().stream);
    it->second.pop_back();
    return s;
  }
  void PutIdle(net::io_context* ioc, const std::string& address, Conn s) {
    auto& idle = Local(ioc).idle;
    auto it = idle.find(address);
    if (it == idle.end()) it = idle.emplace(address, std::deque<Idle>()).first;
    DropStale(it->second);
    if (it->second.size() < options.max_idle_per_address) {
      it->second.push_back({std::move(s), std::chrono::steady_clock::now()});
    }
  }

  Watched::iterator Watch(net::io_context* ioc, std::weak_ptr<Expirable> e) {
    auto& sw = Local(ioc).sweeper;
    if (!sw) sw = std::make_unique<Sweeper>(*ioc);
    Watched::iterator it;
    if (sw->spare.empty()) {
      it = sw->live.insert(sw->live.end(), std::move(e));
    } else {
      it = sw->spare.begin();
      *it = std::move(e);
      sw->live.splice(sw->live.end(), sw->spare, it);
    }
    if (!sw->ticking) {
      sw->ticking = true;
      Arm(sw.get());
    }
    return it;
  }
  void Unwatch(net::io_context* ioc, Watched::iterator it) {
    Sweeper& sw = *Local(ioc).sweeper;
    it->reset();
    sw.spare.splice(sw.spare.end(), sw.live, it);
  }
  static void Arm(Sweeper* sw) {
    sw->timer.expires_after(kSweep);
    sw->timer.async_wait([sw](boost::system::error_code ec) {
      if (ec) return;  // the pool is going away
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
        Arm(sw);
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
    tcp::resolver resolver(*io);
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

// One request/answer exchange on one connection: the head written into the connection's
// buffer and sent with the body in one gathered write (the body is not copied), the answer
// parsed from the connection's read buffer as it arrives.
class Exchange : public UpstreamPool::Impl::Expirable,
                 public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(UpstreamPool::Impl* pool, net::io_context* ioc, std::string address, UpstreamRequest r,
           std::function<void(UpstreamResult)> done)
      : pool_(pool),
        ioc_(ioc),
        address_(std::move(address)),
        done_(std::move(done)),
        request_(std::move(r)) {}

  std::chrono::steady_clock::time_point deadline() const override { return request_.deadline; }
  void Expire() override {
    net::post(ioc_->get_executor(), [self = shared_from_this()] {
      if (self->ended_) return;
      self->expired_ = true;  // the operation under way ends with operation_aborted
      boost::system::error_code ignored;
      if (self->stream_) self->stream_.lowest().close(ignored);
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
    received_ = false;
    auto endpoint = pool_->Resolve(address_);
    if (!endpoint.ok()) return Finish(endpoint.status(), true);
    stream_ = Conn();
    if (pool_->options.tls_context) {
      SSL_CTX_up_ref(pool_->options.tls_context.get());  // the Asio context owns one reference
      net::ssl::context context(pool_->options.tls_context.get());
      stream_.tls = std::make_unique<TlsStream>(ioc_->get_executor(), context);
    } else {
      stream_.tcp = std::make_unique<Socket>(ioc_->get_executor());
    }
    stream_.in = std::make_unique<char[]>(kReadBytes);
    stream_.parser = std::make_unique<Http1ResponseParser>(pool_->options.max_response_bytes);
    stream_.lowest().async_connect(*endpoint, [self = shared_from_this()](
                                                  boost::system::error_code ec) {
      if (ec) {
        return self->Finish(
            self->expired_ ? DeadlineExceeded("connecting to " + self->address_ + ": timed out")
                           : Unavailable("connecting to " + self->address_ + ": " + ec.message()),
            !self->expired_);
      }
      boost::system::error_code ignored;
      self->stream_.lowest().set_option(tcp::no_delay(true), ignored);
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
                                                                    boost::system::error_code ec) {
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

  // The head: request line, Host, the caller's headers (not those the gateway frames itself,
  // nor any with a line break), Content-Length.
  void WriteHead() {
    std::string& h = stream_.head;
    h.clear();
    h.append(request_.method).append(" ").append(request_.target).append(" HTTP/1.1\r\nHost: ");
    h.append(address_).append("\r\n");
    auto header = [&h](std::string_view k, std::string_view v) {
      if (k.empty() || Framing(k) || HasLineBreak(k) || HasLineBreak(v)) return;
      h.append(k).append(": ").append(v).append("\r\n");
    };
    for (const auto& [k, v] : request_.headers) header(k, v);
    for (const auto& [k, v] : request_.header_views) header(k, v);
    const std::string_view m = request_.method;
    if (!request_.Body().empty() || m == "POST" || m == "PUT" || m == "PATCH") {
      char digits[24];
      auto end = std::to_chars(digits, digits + sizeof(digits), request_.Body().size()).ptr;
      h.append("Content-Length: ").append(digits, end).append("\r\n");
    }
    h.append("\r\n");
  }

  void Write() {
    WriteHead();
    const std::array<net::const_buffer, 2> out = {net::buffer(stream_.head),
                                                  net::buffer(request_.Body())};
    auto written = [self = shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec && self->reused_ && !self->expired_) {
        return self->Connect();  // the kept-alive connection had gone
      }
      if (ec) return self->Failed(ec, "sending to");
      self->stream_.parser->Reset(self->request_.method == "HEAD");
      self->Read();
    };
    if (stream_.tls) return net::async_write(*stream_.tls, out, std::move(written));
    // Plain TCP: sent at once when the socket takes it (frontends/write_now.h). Nothing written
    // here calls back into another write inline, so the depth is this exchange's own.
    int depth = 0;
    frontends::WriteNow(*stream_.tcp, *stream_.tcp, out, &depth, std::move(written));
  }

  void Read() {
    stream_.With([this](auto& s) {
      s.async_read_some(net::buffer(stream_.in.get(), kReadBytes),
                        [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                          self->OnRead(ec, n);
                        });
    });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    Http1ResponseParser& parser = *stream_.parser;
    if (n > 0) received_ = true;
    if (ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
      switch (parser.Finish()) {
        case Http1ResponseParser::Stop::kComplete:
          // A TLS stream cut without close_notify may have been cut by anyone: a body delimited
          // by that end is not known to be whole.
          if (ec == net::ssl::error::stream_truncated) return Failed(ec, "reading the answer of");
          return Done(false);  // delimited by the close
        case Http1ResponseParser::Stop::kNeedMore:
          // A kept-alive connection the node closed before reading the request (a clean end,
          // nothing received): the request was not processed, send it again. A reset may come
          // after the node took the request: no resend.
          if (reused_ && !expired_ && !received_) return Connect();
          return Failed(ec, "reading the answer of");
        case Http1ResponseParser::Stop::kError:
          return Refused(parser);
      }
    }
    if (ec) return Failed(ec, "reading the answer of");
    std::string_view data(stream_.in.get(), n);
    for (;;) {
      const auto r = parser.Parse(data);
      if (r.stop == Http1ResponseParser::Stop::kNeedMore) return Read();
      if (r.stop == Http1ResponseParser::Stop::kError) return Refused(parser);
      data.remove_prefix(r.consumed);
      // An interim 1xx answer (100 Continue, 103 Early Hints): the real one follows on the same
      // connection.
      if (parser.status() / 100 != 1) break;
      parser.Reset(request_.method == "HEAD");
      if (data.empty()) return Read();
    }
    // Bytes after the answer: the connection's framing is not to be trusted for another one. Nor
    // after a HEAD (a server that sends a body anyway may send it late), nor once expired (the
    // sweep closed the socket).
    Done(parser.keep_alive() && data.empty() && request_.method != "HEAD" && !expired_);
  }

  void Refused(const Http1ResponseParser& parser) {
    if (parser.too_large()) {
      return Finish(Internal("the answer of " + address_ + " exceeds the limit of " +
                             std::to_string(pool_->options.max_response_bytes) + " bytes"),
                    false);
    }
    Finish(Internal("a malformed answer from " + address_ + ": " + parser.error()), false);
  }

  void Failed(boost::system::error_code ec, const char* what) {
    Finish(expired_ ? DeadlineExceeded(std::string(what) + " " + address_ + ": timed out")
                    : Internal(std::string(what) + " " + address_ + ": " + ec.message()),
           false);
  }

  void Done(bool keep_alive) {
    Http1ResponseParser& parser = *stream_.parser;
    UpstreamResult result;
    result.response.status = parser.status();
    result.response.headers = std::move(parser.headers());
    result.response.body = std::move(parser.body());
    if (keep_alive) {
      pool_->PutIdle(ioc_, address_, std::move(stream_));
    } else {
      boost::system::error_code ignored;
      stream_.lowest().close(ignored);
    }
    End();
    done_(std::move(result));
  }

  void Finish(Status s, bool connect_failed) {
    UpstreamResult result;
    result.status = std::move(s);
    result.connect_failed = connect_failed;
    if (stream_) {
      boost::system::error_code ignored;
      stream_.lowest().close(ignored);
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
  const std::string address_;
  std::function<void(UpstreamResult)> done_;
  UpstreamRequest request_;
  Conn stream_;
  bool reused_ = false;
  bool received_ = false;  // a byte of an answer (even a 1xx) came: never sent again
  bool expired_ = false;   // the deadline passed (the sweeper closed the connection)
  bool ended_ = false;
  std::optional<UpstreamPool::Impl::Watched::iterator> watched_;
};

}  // namespace

UpstreamPool::UpstreamPool(UpstreamOptions options)
    : impl_(std::make_unique<Impl>(nullptr, options)) {
  for (auto& ioc : impl_->owned) {
    impl_->threads.emplace_back([ioc = ioc.get()] { ioc->run(); });
  }
}

UpstreamPool::UpstreamPool(net::io_context* io, UpstreamOptions options)
    : impl_(std::make_unique<Impl>(io, options)) {}

UpstreamPool::~UpstreamPool() {
  impl_->work.clear();
  for (auto& ioc : impl_->owned) ioc->stop();
  for (auto& t : impl_->threads) t.join();
  MutexLock l(&impl_->mu);
  impl_->per_io.clear();
}

net::io_context& UpstreamPool::io_context() { return *impl_->io; }

void UpstreamPool::Send(const std::string& address, UpstreamRequest request,
                        std::function<void(UpstreamResult)> done) {
  net::io_context& ioc = impl_->Here();
  auto exchange =
      std::make_shared<Exchange>(impl_.get(), &ioc, address, std::move(request), std::move(done));
  // dispatch: on this io_context's own thread the request goes out at once.
  net::dispatch(ioc, [exchange] { exchange->Start(); });
}

}  // namespace dais::gateway
