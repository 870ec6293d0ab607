#include "perf/grpc_h2.h"

#include <fmt/format.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <charconv>
#include <cstring>
#include <utility>

#include "dais/clock.h"

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

struct GrpcH2Connection::Stream {
  std::string body;  // framed request
  size_t pos = 0;
  int64_t start_ns = 0;
  int grpc_status = -1;
  int http_status = 0;
  std::string grpc_message;
  uint32_t reset = 0;
};

struct GrpcH2Connection::Callbacks {
  static GrpcH2Connection* Conn(void* p) { return static_cast<GrpcH2Connection*>(p); }
  static Stream* Find(void* p, int32_t id) {
    auto& m = Conn(p)->streams_;
    auto it = m.find(id);
    return it == m.end() ? nullptr : it->second.get();
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                      void* user_data) {
    Stream* s = Find(user_data, frame->hd.stream_id);
    if (!s) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == "grpc-status") {
      int code = -1;
      std::from_chars(v.data(), v.data() + v.size(), code);
      s->grpc_status = code;
    } else if (n == "grpc-message") {
      s->grpc_message = PercentDecode(v);
    } else if (n == ":status") {
      std::from_chars(v.data(), v.data() + v.size(), s->http_status);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* user_data) {
    if (Stream* s = Find(user_data, id)) {
      s->reset = error_code;
      Conn(user_data)->ended_.push_back(id);
    }
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user_data) {
    Stream* s = Find(user_data, id);
    if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const size_t n = std::min(length, s->body.size() - s->pos);
    std::memcpy(buf, s->body.data() + s->pos, n);
    s->pos += n;
    if (s->pos == s->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

GrpcH2Connection::GrpcH2Connection(net::io_context* ioc, tcp::resolver::results_type endpoints,
                                   std::string authority, tls::SslCtxPtr tls_context,
                                   std::string tls_name)
    : socket_(*ioc),
      endpoints_(std::move(endpoints)),
      authority_(std::move(authority)),
      tls_context_(std::move(tls_context)),
      tls_name_(std::move(tls_name)) {
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
  if (tls_context_) RETURN_IF_ERROR(Handshake());
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::OnStreamClose);
  nghttp2_session_client_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16u << 20}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  if (!early_.empty()) {
    nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(early_.data()),
                             early_.size());
    early_.clear();
  }
  MutexLock lock(&fd_mu_);
  fd_ = socket_.native_handle();
  return OkStatus();
}

Status GrpcH2Connection::Handshake() {
  tls_ = std::make_unique<tls::Engine>(tls_context_, /*server=*/false);
  static const unsigned char kH2[] = "\x02h2";
  SSL_set_alpn_protos(tls_->ssl(), kH2, sizeof(kH2) - 1);
  Status s = tls_name_.empty() ? OkStatus() : tls::SetPeerName(tls_->ssl(), tls_name_);
  std::string wire;
  if (s.ok()) s = tls_->Start(&wire);
  while (s.ok() && !tls_->established()) {
    if (!wire.empty()) RETURN_IF_ERROR(WriteAll(wire));
    wire.clear();
    boost::system::error_code ec;
    size_t got = socket_.read_some(net::buffer(rbuf_), ec);
    if (ec) {
      s = Unavailable(fmt::format("connection to {}: {}", authority_, ec.message()));
      break;
    }
    s = tls_->Receive(reinterpret_cast<const uint8_t*>(rbuf_.data()), got, &early_, &wire);
  }
  if (s.ok() && !wire.empty()) s = WriteAll(wire);
  if (!s.ok()) {
    Close();
    return Unavailable(fmt::format("TLS handshake with {}: {}", authority_, s.message()));
  }
  return OkStatus();
}

Status GrpcH2Connection::WriteAll(const std::string& bytes) {
  boost::system::error_code ec;
  net::write(socket_, net::buffer(bytes), ec);
  if (ec) return Unavailable(fmt::format("connection to {}: {}", authority_, ec.message()));
  return OkStatus();
}

Status GrpcH2Connection::ReadSome(std::string* plain) {
  boost::system::error_code ec;
  size_t got = socket_.read_some(net::buffer(rbuf_), ec);
  if (ec) return Unavailable(fmt::format("connection to {}: {}", authority_, ec.message()));
  if (!tls_) {
    plain->assign(rbuf_.data(), got);
    return OkStatus();
  }
  plain->clear();
  std::string wire;
  RETURN_IF_ERROR(tls_->Receive(reinterpret_cast<const uint8_t*>(rbuf_.data()), got, plain, &wire));
  if (!wire.empty()) RETURN_IF_ERROR(WriteAll(wire));
  return OkStatus();
}

void GrpcH2Connection::Close() {
  {
    MutexLock lock(&fd_mu_);
    fd_ = -1;
  }
  boost::system::error_code ec;
  socket_.close(ec);
  tls_.reset();
  early_.clear();
  if (session_) nghttp2_session_del(session_);
  session_ = nullptr;
}

void GrpcH2Connection::Abort() {
  aborted_.store(true);
  MutexLock lock(&fd_mu_);
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
  if (!out_.empty()) {
    Status s;
    if (tls_) {
      std::string wire;
      s = tls_->Send(out_, &wire);
      if (s.ok()) s = WriteAll(wire);
    } else {
      s = WriteAll(out_);
    }
    out_.clear();
    RETURN_IF_ERROR(s);
  }
  if (streams_.size() == ended_.size()) return OkStatus();  // nothing to wait for
  std::string plain;
  RETURN_IF_ERROR(ReadSome(&plain));
  if (plain.empty()) return OkStatus();
  ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(plain.data()),
                                        plain.size());
  if (rv < 0) return Internal(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
  return OkStatus();
}

StatusOr<int32_t> GrpcH2Connection::Submit(const std::string& path, const std::string& message) {
  if (session_ && streams_.empty() && !nghttp2_session_check_request_allowed(session_)) {
    Close();  // the server said GOAWAY: a new connection
  }
  if (!session_) RETURN_IF_ERROR(Connect());
  auto s = std::make_unique<Stream>();
  s->body.resize(5);
  const auto len = static_cast<uint32_t>(message.size());
  s->body[1] = static_cast<char>(len >> 24);
  s->body[2] = static_cast<char>(len >> 16);
  s->body[3] = static_cast<char>(len >> 8);
  s->body[4] = static_cast<char>(len);
  s->body += message;
  s->start_ns = NowNs();
  const nghttp2_nv nv[] = {Header(":method", "POST"),
                           Header(":scheme", tls_context_ ? "https" : "http"),
                           Header(":path", path),
                           Header(":authority", authority_),
                           Header("content-type", "application/grpc"),
                           Header("te", "trailers")};
  nghttp2_data_provider prd{};
  prd.read_callback = Callbacks::ReadBody;
  int32_t id = nghttp2_submit_request(session_, nullptr, nv, std::size(nv), &prd, nullptr);
  if (id < 0) return Internal(std::string("HTTP/2: ") + nghttp2_strerror(id));
  streams_[id] = std::move(s);
  return id;
}

Status GrpcH2Connection::Result(const Stream& s) const {
  if (s.grpc_status == 0) return OkStatus();
  if (s.grpc_status > 0) {
    const auto code = static_cast<StatusCode>(s.grpc_status);
    return Status(code, fmt::format("gRPC {}: {}", StatusCodeName(code), s.grpc_message));
  }
  if (s.reset != 0) {
    return Unavailable(fmt::format("the server reset the call (HTTP/2 error {})", s.reset));
  }
  return Internal(fmt::format("the answer has no grpc-status (HTTP status {})", s.http_status));
}

Status GrpcH2Connection::Call(const std::string& path, const std::string& message) {
  if (aborted_.load()) return Cancelled("aborted");
  StatusOr<int32_t> id = Submit(path, message);
  Status io = id.status();
  while (io.ok() && ended_.empty()) io = Pump();
  if (io.ok()) {
    auto it = streams_.find(*id);
    Status result = Result(*it->second);
    streams_.erase(it);
    ended_.clear();
    return result;
  }
  streams_.clear();
  ended_.clear();
  Close();
  return aborted_.load() ? Cancelled("aborted") : io;
}

Status GrpcH2Connection::RunSlots(const std::string& path, const std::vector<std::string>& messages,
                                  int slots, size_t* next, const std::function<bool()>& stop,
                                  const CallDone& done) {
  if (aborted_.load()) return Cancelled("aborted");
  Status io;
  bool stopping = false;
  while (io.ok()) {
    while (!stopping && streams_.size() < static_cast<size_t>(slots)) {
      // After a GOAWAY the open calls finish; new ones go on a new connection.
      if (!streams_.empty() && !nghttp2_session_check_request_allowed(session_)) break;
      if (stop()) {
        stopping = true;
        break;
      }
      StatusOr<int32_t> id = Submit(path, messages[*next % messages.size()]);
      ++*next;
      if (!id.ok()) {
        io = id.status();
        break;
      }
    }
    if (!io.ok() || streams_.empty()) break;
    io = Pump();
    const int64_t now = NowNs();
    for (int32_t id : ended_) {
      auto it = streams_.find(id);
      done(it->second->start_ns, now, Result(*it->second));
      streams_.erase(it);
    }
    ended_.clear();
  }
  if (io.ok()) return OkStatus();
  // The connection is broken: every open call ends with the error.
  if (aborted_.load()) io = Cancelled("aborted");
  const int64_t now = NowNs();
  for (auto& [id, s] : streams_) done(s->start_ns, now, io);
  streams_.clear();
  ended_.clear();
  Close();
  return io;
}

}  // namespace dais::perf
