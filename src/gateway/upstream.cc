#include "gateway/upstream.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "common/mutex.h"

namespace dais::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

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
    std::unique_ptr<beast::tcp_stream> stream;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::string, std::deque<Idle>> idle DAIS_GUARDED_BY(mu);
  std::map<std::string, tcp::endpoint> resolved DAIS_GUARDED_BY(mu);

  static void DropStale(std::deque<Idle>& list) {
    const auto now = std::chrono::steady_clock::now();
    while (!list.empty() && now - list.front().since > kMaxIdle) list.pop_front();
  }
  std::unique_ptr<beast::tcp_stream> TakeIdle(const std::string& address) {
    MutexLock l(&mu);
    auto it = idle.find(address);
    if (it == idle.end()) return nullptr;
    DropStale(it->second);
    if (it->second.empty()) return nullptr;
    auto s = std::move(it->second.back().stream);
    it->second.pop_back();
    return s;
  }
  void PutIdle(const std::string& address, std::unique_ptr<beast::tcp_stream> s) {
    MutexLock l(&mu);
    auto& list = idle[address];
    DropStale(list);
    if (list.size() < options.max_idle_per_address) {
      list.push_back({std::move(s), std::chrono::steady_clock::now()});
    }
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
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(UpstreamPool::Impl* pool, std::string address, UpstreamRequest r,
           std::function<void(UpstreamResult)> done)
      : pool_(pool), address_(std::move(address)), done_(std::move(done)), deadline_(r.deadline) {
    request_.method_string(r.method);
    request_.target(r.target);
    request_.version(11);
    request_.set(http::field::host, address_);
    for (auto& [k, v] : r.headers) request_.set(k, v);
    request_.keep_alive(true);
    request_.body() = std::move(r.body);
    request_.prepare_payload();
  }

  void Start() {
    stream_ = pool_->TakeIdle(address_);
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
    stream_ = std::make_unique<beast::tcp_stream>(net::make_strand(pool_->io));
    stream_->expires_at(deadline_);
    stream_->async_connect(*endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        return self->Finish(
            ec == beast::error::timeout
                ? DeadlineExceeded("connecting to " + self->address_ + ": timed out")
                : Unavailable("connecting to " + self->address_ + ": " + ec.message()),
            ec != beast::error::timeout);
      }
      self->Write();
    });
  }

  void Write() {
    stream_->expires_at(deadline_);
    http::async_write(*stream_, request_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec && self->reused_ && ec != beast::error::timeout) {
                          return self->Connect();  // the kept-alive connection had gone
                        }
                        if (ec) return self->Failed(ec, "sending to");
                        self->Read();
                      });
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(pool_->options.max_response_bytes);
    http::async_read(*stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                       // A kept-alive connection the node closed before reading the request
                       // (a clean end, nothing received): the request was not processed, send
                       // it again. A reset may come after the node took the request: no resend.
                       if (ec && self->reused_ && n == 0 &&
                           (ec == http::error::end_of_stream || ec == net::error::eof)) {
                         self->buffer_.clear();
                         return self->Connect();
                       }
                       if (ec) return self->Failed(ec, "reading the answer of");
                       // An interim 1xx answer (100 Continue, 103 Early Hints): the real one
                       // follows on the same connection.
                       if (self->parser_->get().result_int() / 100 == 1) return self->Read();
                       self->Done();
                     });
  }

  void Failed(beast::error_code ec, const char* what) {
    Finish(ec == beast::error::timeout
               ? DeadlineExceeded(std::string(what) + " " + address_ + ": timed out")
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
      stream_->expires_never();
      pool_->PutIdle(address_, std::move(stream_));
    }
    done_(std::move(result));
  }

  void Finish(Status s, bool connect_failed) {
    UpstreamResult result;
    result.status = std::move(s);
    result.connect_failed = connect_failed;
    if (stream_) {
      beast::error_code ignored;
      stream_->socket().close(ignored);
    }
    done_(std::move(result));
  }

  UpstreamPool::Impl* pool_;
  const std::string address_;
  std::function<void(UpstreamResult)> done_;
  const std::chrono::steady_clock::time_point deadline_;
  http::request<http::string_body> request_;
  std::unique_ptr<beast::tcp_stream> stream_;
  bool reused_ = false;
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
  auto exchange =
      std::make_shared<Exchange>(impl_.get(), address, std::move(request), std::move(done));
  // defer: from a handler of the same io_context it runs next on this very thread.
  net::defer(impl_->io, [exchange] { exchange->Start(); });
}

}  // namespace dais::gateway
