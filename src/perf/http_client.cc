#include "perf/http_client.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <optional>

#include "common/mutex.h"
#include "perf/http_codec.h"

namespace dais::perf {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using HttpRequest = bhttp::request<bhttp::string_body>;
using HttpResponse = bhttp::response<bhttp::string_body>;

// One keep-alive connection, reopened after an error. RoundTrip from one thread at a time;
// Abort from any thread.
class Connection {
 public:
  Connection(net::io_context* ioc, tcp::resolver::results_type endpoints, std::string address,
             const ClientOptions& options)
      : socket_(*ioc),
        endpoints_(std::move(endpoints)),
        address_(std::move(address)),
        tls_context_(options.tls_context),
        tls_name_(options.tls.server_name.empty() ? options.host : options.tls.server_name),
        tls_verify_(options.tls.verify) {}

  // Sends `req` and reads the whole response into `res`. A kept-alive connection that the
  // server closed meanwhile is reopened and the request sent again once (nothing was read).
  // Unavailable on I/O errors; Cancelled after Abort.
  Status RoundTrip(const HttpRequest& req, HttpResponse* res) {
    for (int attempt = 0;; ++attempt) {
      if (aborted_.load()) return Cancelled("aborted");
      bool reused = socket_.is_open();
      if (!reused) RETURN_IF_ERROR(Connect());
      beast::error_code ec;
      bool nothing_read = true;
      auto exchange = [&](auto& stream) {
        bhttp::write(stream, req, ec);
        if (ec) return;
        bhttp::response_parser<bhttp::string_body> parser;
        // No limit (boost::none would be the idiom, but Boost 1.74 then rejects every body
        // with a Content-Length).
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        parser.header_limit(1 << 20);
        bhttp::read(stream, buffer_, parser, ec);
        nothing_read = !parser.got_some();
        if (!ec) *res = parser.release();
      };
      if (tls_) {
        exchange(*tls_);
      } else {
        exchange(socket_);
      }
      if (!ec) {
        if (!res->keep_alive()) Close();
        return OkStatus();
      }
      Close();
      if (aborted_.load()) return Cancelled("aborted");
      if (reused && nothing_read && attempt == 0) continue;  // stale keep-alive connection
      return Unavailable(fmt::format("connection to {}: {}", address_, ec.message()));
    }
  }

  void Abort() {
    aborted_.store(true);
    MutexLock lock(&fd_mu_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

  ~Connection() { Close(); }

 private:
  Status Connect() {
    beast::error_code ec;
    net::connect(socket_, endpoints_, ec);
    if (ec) {
      Close();
      return Unavailable(fmt::format("cannot connect to {}: {}", address_, ec.message()));
    }
    socket_.set_option(tcp::no_delay(true), ec);
    buffer_.clear();
    {
      MutexLock lock(&fd_mu_);
      fd_ = socket_.native_handle();
    }
    if (tls_context_) return Handshake();
    return OkStatus();
  }

  // HTTPS: the client side of the handshake, the server's name checked.
  Status Handshake() {
    SSL_CTX_up_ref(tls_context_.get());  // the Asio context owns one reference
    net::ssl::context context(tls_context_.get());
    tls_.emplace(socket_, context);
    if (tls_verify_) {
      if (Status s = tls::SetPeerName(tls_->native_handle(), tls_name_); !s.ok()) {
        Close();
        return s;
      }
    }
    static const unsigned char kHttp11[] = "\x08http/1.1";
    SSL_set_alpn_protos(tls_->native_handle(), kHttp11, sizeof(kHttp11) - 1);
    beast::error_code ec;
    tls_->handshake(net::ssl::stream_base::client, ec);
    if (!ec) return OkStatus();
    std::string why = ec.message();
    if (ec.category() == net::error::get_ssl_category()) {
      why = tls::DescribeFailure(tls_->native_handle(), static_cast<unsigned long>(ec.value()));
    }
    Close();
    return Unavailable(fmt::format("TLS handshake with {}: {}", address_, why));
  }

  void Close() {
    {
      MutexLock lock(&fd_mu_);
      fd_ = -1;
    }
    tls_.reset();
    beast::error_code ec;
    socket_.close(ec);
    buffer_.clear();
  }

  tcp::socket socket_;
  tcp::resolver::results_type endpoints_;
  std::string address_;
  tls::SslCtxPtr tls_context_;  // HTTPS when set
  std::string tls_name_;
  bool tls_verify_;
  std::optional<net::ssl::stream<tcp::socket&>> tls_;
  beast::flat_buffer buffer_;
  std::atomic<bool> aborted_{false};
  Mutex fd_mu_;
  int fd_ DAIS_GUARDED_BY(fd_mu_) = -1;  // for Abort: shut down to wake a blocked read
};

Status HttpError(unsigned status, std::string_view body) {
  std::string text = fmt::format("HTTP {}: {}", status, ErrorText(body));
  if (status == 404) return NotFound(std::move(text));
  if (status == 400) return InvalidArgument(std::move(text));
  if (status == 501) return Unimplemented(std::move(text));
  if (status == 503) return Unavailable(std::move(text));
  if (status == 504) return DeadlineExceeded(std::move(text));
  return Internal(std::move(text));
}

class HttpSession : public InferSession {
 public:
  HttpSession(std::unique_ptr<Connection> conn, std::vector<HttpRequest> requests)
      : conn_(std::move(conn)), requests_(std::move(requests)) {}

  Status Infer() override {
    const HttpRequest& req = requests_[next_];
    next_ = (next_ + 1) % requests_.size();
    HttpResponse res;
    RETURN_IF_ERROR(conn_->RoundTrip(req, &res));
    if (res.result_int() != 200) return HttpError(res.result_int(), res.body());
    return OkStatus();
  }

  void Abort() override { conn_->Abort(); }

 private:
  std::unique_ptr<Connection> conn_;
  std::vector<HttpRequest> requests_;
  size_t next_ = 0;
};

class HttpClient : public Client {
 public:
  HttpClient(ClientOptions options, tcp::resolver::results_type endpoints)
      : options_(std::move(options)),
        address_(options_.host + ":" + options_.port),
        endpoints_(std::move(endpoints)),
        control_(&ioc_, endpoints_, address_, options_) {
    base_path_ = "/v2/models/" + options_.model_name;
    if (!options_.model_version.empty()) base_path_ += "/versions/" + options_.model_version;
  }

  StatusOr<ModelInfo> GetModelInfo() override {
    std::string body;
    unsigned status = 0;
    RETURN_IF_ERROR(Get(base_path_, &status, &body));
    if (status != 200) return HttpError(status, body);
    ASSIGN_OR_RETURN(ModelInfo info, ParseModelMetadata(body));
    RETURN_IF_ERROR(Get(base_path_ + "/config", &status, &body));
    if (status == 200) {
      ASSIGN_OR_RETURN(info.max_batch_size, ParseMaxBatchSize(body));
    } else {
      info.max_batch_size = -1;
    }
    return info;
  }

  StatusOr<ServerStats> GetStats() override {
    std::string body;
    unsigned status = 0;
    RETURN_IF_ERROR(Get(base_path_ + "/stats", &status, &body));
    if (status != 200)
      return Unimplemented(fmt::format("GET {}/stats: HTTP {}", base_path_, status));
    auto stats = ParseModelStatistics(body);
    if (!stats.ok()) return Unimplemented(stats.status().message());
    return stats;
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession(
      const std::vector<RequestInputs>& requests) override {
    if (requests.empty()) return InvalidArgument("a session needs at least one request");
    std::vector<HttpRequest> built;
    built.reserve(requests.size());
    for (const RequestInputs& inputs : requests) {
      InferBody b = BuildInferBody(inputs, options_.http_binary);
      HttpRequest req{bhttp::verb::post, base_path_ + "/infer", 11};
      req.set(bhttp::field::host, address_);
      req.set(bhttp::field::user_agent, "dais-perf");
      if (b.header_length > 0) {
        req.set(bhttp::field::content_type, "application/octet-stream");
        req.set("Inference-Header-Content-Length", std::to_string(b.header_length));
      } else {
        req.set(bhttp::field::content_type, "application/json");
      }
      req.keep_alive(true);
      req.body() = std::move(b.body);
      req.prepare_payload();
      built.push_back(std::move(req));
    }
    return std::unique_ptr<InferSession>(std::make_unique<HttpSession>(
        std::make_unique<Connection>(&ioc_, endpoints_, address_, options_), std::move(built)));
  }

  std::string Describe() const override {
    return fmt::format("{} ({}) {}", options_.tls_context ? "https" : "http",
                       options_.http_binary ? "binary" : "JSON", address_);
  }

 private:
  Status Get(const std::string& target, unsigned* status, std::string* body) {
    HttpRequest req{bhttp::verb::get, target, 11};
    req.set(bhttp::field::host, address_);
    req.set(bhttp::field::user_agent, "dais-perf");
    req.keep_alive(true);
    HttpResponse res;
    RETURN_IF_ERROR(control_.RoundTrip(req, &res));
    *status = res.result_int();
    *body = std::move(res.body());
    return OkStatus();
  }

  ClientOptions options_;
  std::string address_;
  std::string base_path_;
  net::io_context ioc_;  // never run: synchronous operations only need it to exist
  tcp::resolver::results_type endpoints_;
  Connection control_;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> MakeHttpClient(const ClientOptions& options) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(options.host, options.port, ec);
  if (ec) {
    return Unavailable(fmt::format("cannot resolve {}: {}", options.host, ec.message()));
  }
  return std::unique_ptr<Client>(std::make_unique<HttpClient>(options, std::move(endpoints)));
}

}  // namespace dais::perf
