#include "gateway/grpc_upstream.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <charconv>
#include <cstring>
#include <map>
#include <unordered_map>

#include "common/mutex.h"
#include "frontends/listen.h"
#include "tls/engine.h"

namespace dais::gateway {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kCancelled = 1, kUnknown = 2, kDeadlineExceeded = 4, kResourceExhausted = 8,
              kUnimplemented = 12, kInternal = 13, kUnavailable = 14, kUnauthenticated = 16,
              kPermissionDenied = 7;

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

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

// The gRPC spec's mapping of an HTTP status without grpc-status to a code.
int CodeOfHttpStatus(int status) {
  switch (status) {
    case 400:
      return kInternal;
    case 401:
      return kUnauthenticated;
    case 403:
      return kPermissionDenied;
    case 404:
      return kUnimplemented;
    case 429:
    case 502:
    case 503:
    case 504:
      return kUnavailable;
    default:
      return kUnknown;
  }
}

// grpc-timeout: at most 8 digits and a unit.
std::string GrpcTimeout(Clock::duration left) {
  int64_t us =
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
  if (us < 100000000) return std::to_string(us) + "u";
  const int64_t ms = us / 1000;
  if (ms < 100000000) return std::to_string(ms) + "m";
  return std::to_string(std::min<int64_t>(ms / 1000, 99999999)) + "S";
}

// Appends `message` with gRPC's length prefix (uncompressed) to `out`.
void AppendFramed(std::string* out, std::string_view message) {
  const auto len = static_cast<uint32_t>(message.size());
  const char header[5] = {0, static_cast<char>(len >> 24), static_cast<char>(len >> 16),
                          static_cast<char>(len >> 8), static_cast<char>(len)};
  out->append(header, 5);
  out->append(message);
}

bool Passed(std::string_view name) {
  return !name.empty() && name[0] != ':' && name.rfind("grpc-", 0) != 0 && name != "content-type" &&
         name != "content-length" && name != "te";
}

class Connection;

class Call final : public GrpcUpstreamCall, public std::enable_shared_from_this<Call> {
 public:
  Call(std::shared_ptr<Connection> conn, GrpcCallOptions o)
      : options(std::move(o)), conn(std::move(conn)) {}
  void Send(std::string message) override;
  void HalfClose() override;
  void Cancel() override;

  // The rest only on the connection's strand.
  GrpcCallOptions options;
  const std::shared_ptr<Connection> conn;
  int32_t id = 0;  // 0: not submitted yet
  std::string out;
  size_t out_pos = 0;
  bool half_closed = false;
  bool finished = false;
  std::string in;
  int grpc_status = -1;
  int http_status = 0;
  std::string grpc_message;
  GrpcResult result;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& io, std::string address, uint32_t max_message,
             tls::SslCtxPtr tls_context = nullptr, std::string tls_name = "")
      : strand(net::make_strand(io)),
        address_(std::move(address)),
        max_message_(max_message),
        tls_context_(std::move(tls_context)),
        tls_name_(std::move(tls_name)),
        resolver_(strand),
        socket_(strand),
        deadline_timer_(strand) {
    rbuf_.resize(64 * 1024);
  }
  ~Connection() {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  net::strand<net::io_context::executor_type> strand;
  // False once the connection failed or the node said GOAWAY: the next call opens a new one.
  std::atomic<bool> usable{true};

  void Add(const std::shared_ptr<Call>& c);
  void DoSend(const std::shared_ptr<Call>& c, std::string message);
  void DoHalfClose(const std::shared_ptr<Call>& c);
  // Ends the call now with `code` (resetting its stream if it has one).
  void End(const std::shared_ptr<Call>& c, int code, const std::string& message, bool timed_out);
  void Fail(const std::string& why);

 private:
  struct Callbacks;
  void Connect();
  // TLS (when configured): the client handshake over socket_, then Open.
  void Handshake();
  void HandshakeRead();
  // Starts the HTTP/2 session and sends what waited for the connection.
  void Open();
  // Writes bytes for the node (encrypted with TLS) after what is being written.
  void Send(std::string_view bytes);
  void Submit(const std::shared_ptr<Call>& c);
  void Flush();
  void Read();
  void OnRead(boost::system::error_code ec, size_t n);
  void Finish(const std::shared_ptr<Call>& c, GrpcResult result);
  // Deadlines: one timer per connection, at the earliest deadline of its calls (armed only when
  // a call's is earlier than the one set: no timer system call per call); when it fires, the
  // calls past their deadline end and it is set to the next.
  void WatchDeadline(Clock::time_point deadline);
  void SweepDeadlines();
  Call* Find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  enum class State { kNew, kConnecting, kOpen, kClosed };
  const std::string address_;
  const uint32_t max_message_;
  const tls::SslCtxPtr tls_context_;
  const std::string tls_name_;
  std::unique_ptr<tls::Engine> tls_;
  std::string plain_;  // the last read, decrypted
  State state_ = State::kNew;
  tcp::resolver resolver_;
  tcp::socket socket_;
  net::steady_timer deadline_timer_;
  Clock::time_point timer_at_ = Clock::time_point::max();  // max: not armed
  nghttp2_session* session_ = nullptr;
  std::vector<std::shared_ptr<Call>> waiting_;  // until connected
  std::unordered_map<int32_t, std::shared_ptr<Call>> streams_;
  std::string wbuf_, sending_;
  std::string pending_;  // bytes for the socket (encrypted with TLS) waiting for the write
  bool writing_ = false;
  bool in_recv_ = false;  // inside nghttp2_session_mem_recv: no mem_send (Read flushes after)
  std::string rbuf_;
};

void Call::Send(std::string message) {
  net::post(conn->strand, [self = shared_from_this(), m = std::move(message)]() mutable {
    self->conn->DoSend(self, std::move(m));
  });
}

void Call::HalfClose() {
  net::post(conn->strand, [self = shared_from_this()] { self->conn->DoHalfClose(self); });
}

void Call::Cancel() {
  net::post(conn->strand, [self = shared_from_this()] {
    self->conn->End(self, kCancelled, "cancelled by the gateway", false);
  });
}

struct Connection::Callbacks {
  static Connection* Conn(void* p) { return static_cast<Connection*>(p); }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* p) {
    Call* c = Conn(p)->Find(frame->hd.stream_id);
    if (c == nullptr) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == "grpc-status") {
      std::from_chars(v.data(), v.data() + v.size(), c->grpc_status);
    } else if (n == "grpc-message") {
      c->grpc_message = PercentDecode(v);
    } else if (n == ":status") {
      std::from_chars(v.data(), v.data() + v.size(), c->http_status);
    } else if (Passed(n) && c->result.metadata.size() < 64) {
      c->result.metadata.emplace_back(n, v);
    }
    return 0;
  }

  static int OnData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len,
                    void* p) {
    Connection* conn = Conn(p);
    Call* c = conn->Find(id);
    if (c == nullptr || c->finished) return 0;
    c->in.append(reinterpret_cast<const char*>(data), len);
    while (c->in.size() >= 5) {
      const auto* b = reinterpret_cast<const uint8_t*>(c->in.data());
      const uint32_t size =
          (uint32_t{b[1]} << 24) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 8) | uint32_t{b[4]};
      int error = 0;
      std::string why;
      if (b[0] != 0) {
        error = kInternal;
        why = "the node sent a compressed message, which the gateway does not forward";
      } else if (size > conn->max_message_) {
        error = kResourceExhausted;
        why = "the node's message is larger than " + std::to_string(conn->max_message_) + " bytes";
      }
      if (error != 0) {
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        conn->End(c->shared_from_this(), error, why, false);
        return 0;
      }
      if (c->in.size() < 5 + size) break;
      std::string message = c->in.substr(5, size);
      c->in.erase(0, 5 + size);
      if (c->options.on_message) c->options.on_message(std::move(message));
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* p) {
    Connection* conn = Conn(p);
    Call* c = conn->Find(id);
    if (c == nullptr) return 0;
    GrpcResult r = std::move(c->result);
    if (c->grpc_status >= 0) {
      r.code = c->grpc_status;
      r.message = std::move(c->grpc_message);
      if (r.code == 0 && !c->in.empty()) {
        r.code = kInternal;
        r.message = "the node's answer ended inside a message";
      }
    } else if (error_code == NGHTTP2_REFUSED_STREAM) {
      r.code = kUnavailable;
      r.message = "node " + conn->address_ + " refused the call (it is going away)";
      r.not_sent = true;
    } else if (c->http_status != 0 && c->http_status != 200) {
      r.code = CodeOfHttpStatus(c->http_status);
      r.message = "node " + conn->address_ + " answered HTTP " + std::to_string(c->http_status);
    } else {
      r.code = kUnavailable;
      r.message = "node " + conn->address_ + " ended the call without a status (HTTP/2 error " +
                  std::to_string(error_code) + ")";
    }
    conn->Finish(c->shared_from_this(), std::move(r));
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* p) {
    if (frame->hd.type == NGHTTP2_GOAWAY) Conn(p)->usable.store(false);
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* p) {
    Call* c = Conn(p)->Find(id);
    if (c == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const size_t n = std::min(length, c->out.size() - c->out_pos);
    if (n > 0) std::memcpy(buf, c->out.data() + c->out_pos, n);
    c->out_pos += n;
    if (c->out_pos == c->out.size()) {
      c->out.clear();
      c->out_pos = 0;
      if (c->half_closed) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
      } else if (n == 0) {
        return NGHTTP2_ERR_DEFERRED;
      }
    }
    return static_cast<ssize_t>(n);
  }
};

void Connection::WatchDeadline(Clock::time_point deadline) {
  if (deadline >= timer_at_ || state_ == State::kClosed) return;
  timer_at_ = deadline;
  deadline_timer_.expires_at(deadline);
  deadline_timer_.async_wait([weak = weak_from_this(), deadline](boost::system::error_code ec) {
    auto self = weak.lock();
    // Cancelled: an earlier deadline was set meanwhile (its own wait runs the sweep).
    if (ec || !self || self->timer_at_ != deadline) return;
    self->SweepDeadlines();
  });
}

void Connection::SweepDeadlines() {
  timer_at_ = Clock::time_point::max();
  const Clock::time_point now = Clock::now();
  std::vector<std::shared_ptr<Call>> late;
  Clock::time_point next = Clock::time_point::max();
  auto look = [&](const std::shared_ptr<Call>& c) {
    if (c->options.deadline <= now) {
      late.push_back(c);
    } else {
      next = std::min(next, c->options.deadline);
    }
  };
  for (const auto& c : waiting_) look(c);
  for (const auto& [id, c] : streams_) look(c);
  for (const auto& c : late) {
    End(c, kDeadlineExceeded, "deadline exceeded waiting for the node", true);
  }
  if (next != Clock::time_point::max()) WatchDeadline(next);
}

void Connection::Add(const std::shared_ptr<Call>& c) {
  if (c->options.deadline != Clock::time_point::max()) WatchDeadline(c->options.deadline);
  switch (state_) {
    case State::kClosed: {
      GrpcResult r;
      r.code = kUnavailable;
      r.message = "the connection to node " + address_ + " is closed";
      r.not_sent = true;
      return Finish(c, std::move(r));
    }
    case State::kNew:
      waiting_.push_back(c);
      return Connect();
    case State::kConnecting:
      waiting_.push_back(c);
      return;
    case State::kOpen:
      Submit(c);
      return Flush();
  }
}

void Connection::Connect() {
  state_ = State::kConnecting;
  const size_t colon = address_.rfind(':');
  if (colon == std::string::npos) return Fail("no port in the node's gRPC address");
  std::string host = address_.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  resolver_.async_resolve(
      host, address_.substr(colon + 1),
      [self = shared_from_this()](boost::system::error_code ec, tcp::resolver::results_type r) {
        if (ec) return self->Fail("cannot resolve: " + ec.message());
        net::async_connect(self->socket_, r,
                           [self](boost::system::error_code ec, const tcp::endpoint&) {
                             if (self->state_ == State::kClosed) return;
                             if (ec) return self->Fail("cannot connect: " + ec.message());
                             self->socket_.set_option(tcp::no_delay(true), ec);
                             if (self->tls_context_) return self->Handshake();
                             self->Open();
                           });
      });
}

void Connection::Handshake() {
  tls_ = std::make_unique<tls::Engine>(tls_context_, /*server=*/false);
  static const unsigned char kH2[] = "\x02h2";
  SSL_set_alpn_protos(tls_->ssl(), kH2, sizeof(kH2) - 1);
  std::string name = tls_name_;
  if (name.empty()) {
    name = address_.substr(0, address_.rfind(':'));
    if (name.size() > 2 && name.front() == '[') name = name.substr(1, name.size() - 2);
  }
  if (Status s = tls::SetPeerName(tls_->ssl(), name); !s.ok()) return Fail(s.message());
  std::string wire;
  if (Status s = tls_->Start(&wire); !s.ok()) return Fail(s.message());
  Send(wire);
  HandshakeRead();
}

void Connection::HandshakeRead() {
  socket_.async_read_some(
      net::buffer(rbuf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (self->state_ == State::kClosed) return;
        if (ec) return self->Fail("TLS handshake: " + ec.message());
        std::string wire;
        self->plain_.clear();
        Status s = self->tls_->Receive(reinterpret_cast<const uint8_t*>(self->rbuf_.data()), n,
                                       &self->plain_, &wire);
        if (!wire.empty()) self->Send(wire);  // raw: handshake records are already encrypted
        if (!s.ok())
          return self->Fail("TLS handshake: " + std::string(self->tls_->failure_detail()));
        if (!self->tls_->established()) return self->HandshakeRead();
        self->Open();
      });
}

void Connection::Open() {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, Callbacks::OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, Callbacks::OnFrame);
  nghttp2_session_client_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 8u << 20},
                                             {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  state_ = State::kOpen;
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (const auto& c : waiting) {
    if (!c->finished) Submit(c);
  }
  Flush();
  if (!plain_.empty()) {  // HTTP/2 bytes that came with the handshake's end
    nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(plain_.data()),
                             plain_.size());
    plain_.clear();
  }
  Read();
}

void Connection::Submit(const std::shared_ptr<Call>& c) {
  GrpcResult refused;
  refused.code = kUnavailable;
  refused.not_sent = true;
  if (!nghttp2_session_check_request_allowed(session_)) {
    usable.store(false);
    refused.message = "node " + address_ + " is going away";
    return Finish(c, std::move(refused));
  }
  std::string timeout;
  std::vector<nghttp2_nv> nv = {Header(":method", "POST"),
                                Header(":scheme", "http"),
                                Header(":path", c->options.path),
                                Header(":authority", address_),
                                Header("content-type", "application/grpc"),
                                Header("te", "trailers")};
  if (c->options.deadline != Clock::time_point::max()) {
    timeout = GrpcTimeout(c->options.deadline - Clock::now());
    nv.push_back(Header("grpc-timeout", timeout));
  }
  for (const auto& [k, v] : c->options.metadata) nv.push_back(Header(k, v));
  nghttp2_data_provider body{};
  body.read_callback = Callbacks::ReadBody;
  const int32_t id =
      nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &body, nullptr);
  if (id < 0) {
    refused.message = std::string("HTTP/2: ") + nghttp2_strerror(id);
    return Finish(c, std::move(refused));
  }
  c->id = id;
  streams_[id] = c;
}

void Connection::DoSend(const std::shared_ptr<Call>& c, std::string message) {
  if (c->finished || c->half_closed) return;
  if (c->out.empty()) c->out_pos = 0;
  AppendFramed(&c->out, message);
  if (c->id > 0 && state_ == State::kOpen) {
    nghttp2_session_resume_data(session_, c->id);
    Flush();
  }
}

void Connection::DoHalfClose(const std::shared_ptr<Call>& c) {
  if (c->finished || c->half_closed) return;
  c->half_closed = true;
  if (c->id > 0 && state_ == State::kOpen) {
    nghttp2_session_resume_data(session_, c->id);
    Flush();
  }
}

void Connection::End(const std::shared_ptr<Call>& c, int code, const std::string& message,
                     bool timed_out) {
  if (c->finished) return;
  if (c->id > 0 && state_ == State::kOpen) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_CANCEL);
  }
  GrpcResult r = std::move(c->result);
  r.code = code;
  r.message = message;
  r.timed_out = timed_out;
  Finish(c, std::move(r));
  Flush();
}

void Connection::Finish(const std::shared_ptr<Call>& c, GrpcResult result) {
  if (c->finished) return;
  c->finished = true;
  if (c->id > 0) streams_.erase(c->id);
  std::erase(waiting_, c);
  auto done = std::move(c->options.on_finish);
  c->options.on_message = nullptr;
  if (done) done(std::move(result));
}

void Connection::Fail(const std::string& why) {
  if (state_ == State::kClosed) return;
  const bool sent = state_ == State::kOpen;
  state_ = State::kClosed;
  usable.store(false);
  boost::system::error_code ignored;
  resolver_.cancel();
  socket_.close(ignored);
  timer_at_ = Clock::time_point::max();
  deadline_timer_.cancel();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  auto streams = std::move(streams_);
  streams_.clear();
  for (const auto& c : waiting) {
    GrpcResult r;
    r.code = kUnavailable;
    r.message = "node " + address_ + ": " + why;
    r.not_sent = true;
    Finish(c, std::move(r));
  }
  for (auto& [id, c] : streams) {
    GrpcResult r = std::move(c->result);
    r.code = kUnavailable;
    r.message = "the connection to node " + address_ + " was lost: " + why;
    r.not_sent = !sent;
    c->id = 0;
    Finish(c, std::move(r));
  }
}

void Connection::Flush() {
  if (state_ != State::kOpen || in_recv_) return;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) return Fail(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    wbuf_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (wbuf_.empty()) return;
  std::string plain = std::move(wbuf_);
  wbuf_.clear();
  if (!tls_) return Send(plain);
  std::string wire;
  if (Status s = tls_->Send(plain, &wire); !s.ok()) return Fail(s.message());
  Send(wire);
}

void Connection::Send(std::string_view bytes) {
  pending_.append(bytes);
  if (writing_ || pending_.empty()) return;
  writing_ = true;
  sending_.swap(pending_);
  net::async_write(socket_, net::buffer(sending_),
                   [self = shared_from_this()](boost::system::error_code ec, size_t) {
                     self->writing_ = false;
                     self->sending_.clear();
                     if (ec) return self->Fail("writing: " + ec.message());
                     if (self->state_ == State::kOpen) self->Flush();
                     self->Send({});
                   });
}

void Connection::Read() {
  socket_.async_read_some(
      net::buffer(rbuf_),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) { self->OnRead(ec, n); });
}

void Connection::OnRead(boost::system::error_code ec, size_t n) {
  if (state_ != State::kOpen) return;
  if (ec) return Fail(ec == net::error::eof ? "the node closed it" : ec.message());
  const uint8_t* data = reinterpret_cast<const uint8_t*>(rbuf_.data());
  if (tls_) {
    std::string wire;
    plain_.clear();
    if (Status s = tls_->Receive(data, n, &plain_, &wire); !s.ok()) return Fail(s.message());
    if (!wire.empty()) Send(wire);
    if (tls_->peer_closed()) return Fail("the node closed it");
    data = reinterpret_cast<const uint8_t*>(plain_.data());
    n = plain_.size();
  }
  in_recv_ = true;
  const ssize_t rv = nghttp2_session_mem_recv(session_, data, n);
  in_recv_ = false;
  if (rv < 0) return Fail(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
  Flush();
  if (state_ != State::kOpen) return;
  if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
    return Fail("the session ended");
  }
  Read();
}

}  // namespace

struct GrpcUpstream::Impl {
  net::io_context* io;
  uint32_t max_message;
  tls::SslCtxPtr tls_context;
  std::string tls_name;
  size_t per_node = 1;
  Mutex mu;
  // Per io_context and node address: its connections, and the turn of the next call.
  struct Slots {
    std::vector<std::shared_ptr<Connection>> connections;
    size_t next = 0;
  };
  std::map<std::pair<net::io_context*, std::string>, Slots> nodes DAIS_GUARDED_BY(mu);
  bool on_callers_thread = true;
  bool closed_all DAIS_GUARDED_BY(mu) = false;  // since CloseAll: the given io_context only

  std::shared_ptr<Connection> Pick(const std::string& address) {
    MutexLock l(&mu);
    // A listener's I/O thread runs an io_context of its own (frontends/listen.h).
    net::io_context* here =
        on_callers_thread && !closed_all ? frontends::CurrentIoContext() : nullptr;
    net::io_context& ioc = here != nullptr ? *here : *io;
    Slots& slots = nodes[{&ioc, address}];
    slots.connections.resize(per_node);
    auto& slot = slots.connections[slots.next++ % per_node];
    if (!slot || !slot->usable.load()) {
      slot = std::make_shared<Connection>(ioc, address, max_message, tls_context, tls_name);
    }
    return slot;
  }

  void CloseAll() {
    MutexLock l(&mu);
    closed_all = true;
    for (auto& [key, slots] : nodes) {
      for (auto& conn : slots.connections) {
        if (conn) net::post(conn->strand, [conn] { conn->Fail("the gateway is stopping"); });
      }
    }
    nodes.clear();
  }
};

GrpcUpstream::GrpcUpstream(net::io_context* io, uint32_t max_message_bytes,
                           tls::SslCtxPtr tls_context, std::string tls_name,
                           int connections_per_node, bool on_callers_thread)
    : impl_(std::make_unique<Impl>()) {
  impl_->io = io;
  impl_->on_callers_thread = on_callers_thread;
  impl_->per_node = static_cast<size_t>(std::max(1, connections_per_node));
  impl_->max_message = max_message_bytes;
  impl_->tls_context = std::move(tls_context);
  impl_->tls_name = std::move(tls_name);
}

GrpcUpstream::~GrpcUpstream() { impl_->CloseAll(); }

void GrpcUpstream::CloseAll() { impl_->CloseAll(); }

std::shared_ptr<GrpcUpstreamCall> GrpcUpstream::Start(const std::string& address,
                                                      GrpcCallOptions options) {
  auto call = std::make_shared<Call>(impl_->Pick(address), std::move(options));
  net::post(call->conn->strand, [call] { call->conn->Add(call); });
  return call;
}

std::shared_ptr<GrpcUpstreamCall> GrpcUpstream::StartUnary(const std::string& address,
                                                           GrpcCallOptions options,
                                                           std::string message) {
  auto call = std::make_shared<Call>(impl_->Pick(address), std::move(options));
  // Not yet seen by the strand: the message and the half-close are there before it submits.
  call->out.reserve(message.size() + 5);
  AppendFramed(&call->out, message);
  call->half_closed = true;
  net::post(call->conn->strand, [call] { call->conn->Add(call); });
  return call;
}

}  // namespace dais::gateway
