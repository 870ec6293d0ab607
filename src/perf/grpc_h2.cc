#include "perf/grpc_h2.h"

#include <fmt/format.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <charconv>
#include <cstring>

namespace dais::perf {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

// grpc-message is percent-encoded.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

struct GrpcH2Connection::Callbacks {
  static GrpcH2Connection* Conn(void* p) { return static_cast<GrpcH2Connection*>(p); }

  static int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
    GrpcH2Connection* c = Conn(user_data);
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == "grpc-status") {
      int code = -1;
      std::from_chars(v.data(), v.data() + v.size(), code);
      c->grpc_status_ = code;
    } else if (n == "grpc-message") {
      c->grpc_message_ = PercentDecode(v);
    } else if (n == ":status") {
      std::from_chars(v.data(), v.data() + v.size(), c->http_status_);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t, uint32_t error_code, void* user_data) {
    Conn(user_data)->done_ = true;
    Conn(user_data)->reset_code_ = error_code;
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source*, void* user_data) {
    GrpcH2Connection* c = Conn(user_data);
    const size_t n = std::min(length, c->body_->size() - c->body_pos_);
    std::memcpy(buf, c->body_->data() + c->body_pos_, n);
    c->body_pos_ += n;
    if (c->body_pos_ == c->body_->size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

GrpcH2Connection::GrpcH2Connection(net::io_context* ioc, tcp::resolver::results_type endpoints,
                                   std::string authority)
    : socket_(*ioc), endpoints_(std::move(endpoints)), authority_(std::move(authority)) {
  rbuf_.resize(64 * 1024);
}

GrpcH2Connection::~GrpcH2Connection() { Close(); }

Status GrpcH2Connection::Connect() {
  boost::system::error_code ec;
  net::connect(socket_, endpoints_, ec);
  if (ec) {
    Close();
    return Unavailable(fmt::format("cannot connect to {}: {}", authority_, ec.message()));
  }
  socket_.set_option(tcp::no_delay(true), ec);
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::OnStreamClose);
  nghttp2_session_client_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16u << 20}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  std::lock_guard<std::mutex> lock(fd_mu_);
  fd_ = socket_.native_handle();
  return OkStatus();
}

void GrpcH2Connection::Close() {
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    fd_ = -1;
  }
  boost::system::error_code ec;
  socket_.close(ec);
  if (session_) nghttp2_session_del(session_);
  session_ = nullptr;
}

void GrpcH2Connection::Abort() {
  aborted_.store(true);
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status GrpcH2Connection::Pump() {
  for (;;) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) return Internal(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  boost::system::error_code ec;
  if (!out_.empty()) {
    net::write(socket_, net::buffer(out_), ec);
    out_.clear();
    if (ec) return Unavailable(fmt::format("connection to {}: {}", authority_, ec.message()));
  }
  if (done_) return OkStatus();
  size_t got = socket_.read_some(net::buffer(rbuf_), ec);
  if (ec) return Unavailable(fmt::format("connection to {}: {}", authority_, ec.message()));
  ssize_t rv =
      nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(rbuf_.data()), got);
  if (rv < 0) return Internal(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
  return OkStatus();
}

Status GrpcH2Connection::Call(const std::string& path, const std::string& message) {
  if (aborted_.load()) return Cancelled("aborted");
  if (session_ && !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
    Close();  // the server said GOAWAY: a new connection
  }
  if (!session_) RETURN_IF_ERROR(Connect());
  std::string body(5, '\0');
  const auto len = static_cast<uint32_t>(message.size());
  body[1] = static_cast<char>(len >> 24);
  body[2] = static_cast<char>(len >> 16);
  body[3] = static_cast<char>(len >> 8);
  body[4] = static_cast<char>(len);
  body += message;
  body_ = &body;
  body_pos_ = 0;
  done_ = false;
  grpc_status_ = -1;
  http_status_ = 0;
  reset_code_ = 0;
  grpc_message_.clear();
  const nghttp2_nv nv[] = {Header(":method", "POST"),
                           Header(":scheme", "http"),
                           Header(":path", path),
                           Header(":authority", authority_),
                           Header("content-type", "application/grpc"),
                           Header("te", "trailers")};
  nghttp2_data_provider prd{};
  prd.read_callback = Callbacks::ReadBody;
  if (int32_t id = nghttp2_submit_request(session_, nullptr, nv, std::size(nv), &prd, nullptr);
      id < 0) {
    Close();
    return Internal(std::string("HTTP/2: ") + nghttp2_strerror(id));
  }
  Status s;
  while (!done_ && s.ok()) s = Pump();
  body_ = nullptr;
  if (!s.ok()) {
    Close();
    return aborted_.load() ? Cancelled("aborted") : s;
  }
  if (grpc_status_ == 0) return OkStatus();
  if (grpc_status_ > 0) {
    const auto code = static_cast<StatusCode>(grpc_status_);
    return Status(code, fmt::format("gRPC {}: {}", StatusCodeName(code), grpc_message_));
  }
  if (reset_code_ != 0) {
    return Unavailable(fmt::format("the server reset the call (HTTP/2 error {})", reset_code_));
  }
  return Internal(fmt::format("the answer has no grpc-status (HTTP status {})", http_status_));
}

}  // namespace dais::perf
