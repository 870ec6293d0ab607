#include "frontends/http/http_server.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <deque>
#include <limits>

#include "common/json.h"
#include "common/logging.h"
#include "common/zlib_codec.h"
#include "frontends/connection_limit.h"
#include "frontends/http/content_coding.h"
#include "frontends/http/infer_codec.h"
#include "frontends/http/response_head.h"
#include "frontends/listen.h"
#include "frontends/request_memory.h"
#include "tls/context.h"

namespace dais::frontends::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

namespace {

constexpr size_t kBodyReadBytes = 64 * 1024;
constexpr int kLingerSecs = 5;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// OK without a Transfer-Encoding; else CheckTransferEncoding of every line of it, joined.
template <class Fields>
Status CheckTransferEncodings(const Fields& h) {
  auto [first, last] = h.equal_range(bhttp::field::transfer_encoding);
  if (first == last) return OkStatus();
  std::string all;
  for (auto it = first; it != last; ++it) {
    if (!all.empty()) all += ',';
    all.append(it->value().data(), it->value().size());
  }
  return CheckTransferEncoding(all);
}

// The answer to plain HTTP on an HTTPS port (sent in plain text: the client speaks it), as
// nginx's 497.
constexpr std::string_view kPlainHttpOnTls =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
    "Content-Length: 71\r\n\r\n"
    "{\"error\":\"plain HTTP request sent to an HTTPS port: use https://\"}\n";

// One connection over Stream: beast::tcp_stream (plain text) or TlsStream (HTTPS, the handshake
// first).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // `tls`: the listener's TLS context (HTTPS), else null.
  Session(tcp::socket socket, tls::ServerContext* tls, const Handler& handler,
          const ServerOptions& options, std::unique_ptr<frontends::ConnectionLimiter::Slot> slot)
      : generation_(tls ? tls->Current() : nullptr),
        stream_(MakeStream(std::move(socket), generation_)),
        tls_(tls),
        handler_(handler),
        options_(options),
        slot_(std::move(slot)) {}

  // On the accepting thread: the connection is idle (may make room for another) from now, not
  // only once its own I/O thread has started reading.
  void Start() {
    MarkIdle();
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->Read();
      }
    });
  }

 private:
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;
  using std::enable_shared_from_this<Session<Stream>>::weak_from_this;

  static Stream MakeStream(tcp::socket socket, const tls::SslCtxPtr& generation) {
    if constexpr (kTls) {
      SSL_CTX_up_ref(generation.get());  // the Asio context owns one reference
      net::ssl::context context(generation.get());
      return Stream(beast::tcp_stream(std::move(socket)), context);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void MarkIdle() {
    slot_->Idle([weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        net::post(self->stream_.get_executor(), [self] { self->Tcp().close(); });
      }
    });
  }

  // HTTPS: a handshake slot (tls/context.h: the oldest silent handshake may be closed for it),
  // the client's first byte within FirstByteTimeoutMs, then the handshake, bounded in time;
  // counted and logged when it fails.
  void Handshake() {
    handshake_ = tls_->BeginHandshake([weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        net::post(self->stream_.get_executor(), [self] { self->Tcp().close(); });
      }
    });
    if (!handshake_) return Tcp().close();  // at the limit, none silent (counted)
    const int wait_ms = tls_->FirstByteTimeoutMs();
    first_byte_timer_.emplace(stream_.get_executor());
    first_byte_timer_->expires_after(std::chrono::milliseconds(wait_ms));
    first_byte_timer_->async_wait([weak = weak_from_this(), wait_ms](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      self->handshake_->Failed("silent_timeout", self->PeerAddress(),
                               "no byte within " + std::to_string(wait_ms) + " ms");
      self->Tcp().close();
    });
    Tcp().socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->first_byte_timer_->cancel();
                                if (ec || !self->Tcp().socket().is_open()) return;  // closed
                                self->handshake_->Heard();
                                self->TlsHandshake();
                              });
  }

  std::string PeerAddress() {
    beast::error_code ignored;
    auto peer = Tcp().socket().remote_endpoint(ignored);
    return ignored ? "?" : peer.address().to_string();
  }

  void TlsHandshake() {
    const int ms = tls_->config().handshake_timeout_ms;
    Tcp().expires_after(std::chrono::milliseconds(ms));
    stream_.async_handshake(
        net::ssl::stream_base::server, [self = shared_from_this(), ms](beast::error_code ec) {
          if (!ec) {
            self->handshake_->Done();
            return self->Read();
          }
          std::string_view reason = "closed";
          std::string detail = ec.message();
          if (ec == beast::error::timeout) {
            reason = "timeout";
            detail = "not finished within " + std::to_string(ms) + " ms";
          } else if (ec.category() == net::error::get_ssl_category()) {
            SSL* ssl = self->stream_.native_handle();
            reason = tls::FailureReason(ssl, static_cast<unsigned long>(ec.value()));
            detail = tls::DescribeFailure(ssl, static_cast<unsigned long>(ec.value()));
          }
          self->handshake_->Failed(reason, self->PeerAddress(), detail);
          if (reason != "http_request") return self->Close();
          net::async_write(self->Tcp().socket(), net::buffer(kPlainHttpOnTls),
                           [self](beast::error_code, size_t) { self->Close(); });
        });
  }

  void Read() {
    head_request_ = false;
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    chunks_ = 0;
    parser_->on_chunk_header(on_chunk_);
    answer_coding_.reset();
    inflater_.reset();
    // An idle keep-alive connection, or a client that stalls mid-request, is closed after this,
    // or earlier when the listener is at its connection limit and this one has waited longest.
    const bool silent_under_pressure = !served_ && slot_->UnderPressure();
    Tcp().expires_after(std::chrono::seconds(
        silent_under_pressure
            ? std::min(options_.idle_timeout_secs, options_.header_timeout_under_pressure_secs)
            : options_.idle_timeout_secs));
    MarkIdle();
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The header is in: the body (if any) is read piece by piece, so that a JSON body nested deeper
  // than the limit is refused after its first bytes rather than read whole (issue 11: 40 MB of
  // '[' took 11.7 s before its 400).
  void OnHeader(beast::error_code ec) {
    if (ec) return OnRead(ec);
    slot_->Busy();
    served_ = true;
    const auto& h = parser_->get();
    if (Status te = CheckTransferEncodings(h); !te.ok()) {
      return AnswerEarly(te.code() == StatusCode::kUnimplemented ? 501 : 400, te.message());
    }
    if (parser_->is_done()) return OnRead(ec);
    json_bytes_ = std::numeric_limits<uint64_t>::max();
    auto ihcl = h.find("Inference-Header-Content-Length");
    if (ihcl != h.end()) {
      // Binary tensor extension: only the first N bytes are JSON (a malformed value is the
      // handler's 400; scan nothing here).
      std::string_view v(ihcl->value().data(), ihcl->value().size());
      uint64_t n = 0;
      auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      json_bytes_ = r.ec == std::errc() && r.ptr == v.data() + v.size() ? n : 0;
    } else {
      auto ct = h.find(bhttp::field::content_type);
      if (ct != h.end() && ct->value().find("octet-stream") != beast::string_view::npos) {
        json_bytes_ = 0;
      }
    }
    inflater_.reset();
    decoded_.clear();
    auto ce = h.find(bhttp::field::content_encoding);
    if (ce != h.end()) {
      auto coding = RequestCoding(std::string_view(ce->value().data(), ce->value().size()));
      if (!coding.ok()) {
        // RFC 9110 §15.5.16: a 415 for a content coding names the ones accepted.
        return AnswerEarly(415, coding.status().message(), {{"Accept-Encoding", "gzip, deflate"}});
      }
      if (*coding) inflater_.emplace(**coding, options_.max_body_bytes);
    }
    // A body that came whole with its head (most requests) is in memory already and takes no
    // time to arrive. Any other is bounded by the process's budget for requests still arriving
    // (a known length reserved whole before a byte of it is read, a chunked one as it comes:
    // OnBody), and may be closed for room, the slowest first, while it arrives.
    const auto length = parser_->content_length();
    arriving_ = !length || *length > buffer_.size();
    if (arriving_) {
      if (length && !reservation_.Hold(*length, options_.listener)) return RefuseForMemory();
      body_since_ = std::chrono::steady_clock::now();
      body_bytes_ = 0;
      slot_->Receiving([weak = weak_from_this()] {
        if (auto self = weak.lock()) {
          net::post(self->stream_.get_executor(), [self] { self->Tcp().close(); });
        }
      });
    }
    scanner_.emplace(options_.max_json_depth);
    scanned_ = 0;
    // Reads of at least 64 KiB while a body comes in: Beast reads what the buffer's spare
    // capacity allows, 512 bytes at a time for a fresh buffer (80,000 reads for 40 MB).
    buffer_.reserve(kBodyReadBytes);
    auto expect = h.find(bhttp::field::expect);
    if (expect != h.end() && beast::iequals(expect->value(), "100-continue")) {
      // RFC 9110 §10.1.1: curl and other clients wait (curl: 1 s) for this before the body.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->Close();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    if (arriving_) Tcp().expires_at(BodyDeadline());
    bhttp::async_read_some(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnBody(ec, n); });
  }

  // When the body must have arrived up to what was read so far: the minimum rate after the
  // grace period (EndpointOptions::min_request_bytes_per_sec), and never later than the idle
  // timeout after the last read.
  std::chrono::steady_clock::time_point BodyDeadline() const {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(options_.idle_timeout_secs);
    if (options_.min_request_bytes_per_sec > 0) {
      const double secs = static_cast<double>(body_bytes_) /
                          static_cast<double>(options_.min_request_bytes_per_sec);
      const auto by_rate = body_since_ +
                           std::chrono::seconds(options_.min_request_rate_grace_secs) +
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(secs));
      deadline = std::min(deadline, by_rate);
    }
    return deadline;
  }

  void RefuseForMemory() {
    return AnswerEarly(503,
                       "the server's budget for request bodies still arriving (" +
                           std::to_string(RequestMemory::Global().limit()) +
                           " bytes, --max-buffered-request-bytes) is spent; retry later",
                       {{"Retry-After", "1"}});
  }

  void OnBody(beast::error_code ec, size_t n) {
    if (ec == beast::error::timeout) {
      slot_->CountSlow();
      beast::error_code ignored;
      auto peer = Tcp().socket().remote_endpoint(ignored);
      LOG_VERBOSE(1,
                  "{}: a request body from {} arrived slower than {} byt/s ({} bytes in {} s); "
                  "closed",
                  options_.listener, ignored ? std::string("?") : peer.address().to_string(),
                  options_.min_request_bytes_per_sec, body_bytes_,
                  std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::steady_clock::now() - body_since_)
                      .count());
    }
    if (ec) return OnRead(ec);
    body_bytes_ += n;
    if (arriving_) slot_->Progress(n);
    std::string& wire = parser_->get().body();
    if (inflater_) {
      // Decompressed as it arrives; the compressed bytes are dropped once inflated (Beast
      // appends each read at the body's end, wherever that is).
      Status s = inflater_->Feed(wire, &decoded_);
      wire.clear();
      if (!s.ok()) {
        return AnswerEarly(s.code() == StatusCode::kResourceExhausted ? 413 : 400, s.message());
      }
    }
    const std::string& body = inflater_ ? decoded_ : wire;
    // What the body's strings and the read buffer have allocated, not only what they hold: a
    // string grows by doubling, so 17 MB of body may sit in 32 MiB.
    if (arriving_) {
      const uint64_t allocated = wire.capacity() + decoded_.capacity() + buffer_.capacity();
      if (allocated > reservation_.held() &&
          !reservation_.Hold(allocated + kBodyReadBytes, options_.listener)) {
        return RefuseForMemory();
      }
    }
    // The depth scan exists to stop reading a hostile body early; on the last piece there is
    // nothing left to read, and the JSON parser applies the same limit.
    const uint64_t until = std::min<uint64_t>(body.size(), json_bytes_);
    if (until > scanned_ && !parser_->is_done()) {
      if (!scanner_->Feed(std::string_view(body).substr(scanned_, until - scanned_))) {
        return AnswerEarly(400, "JSON nested deeper than " + std::to_string(scanner_->max_depth()) +
                                    " levels at offset " + std::to_string(scanner_->offset()));
      }
      scanned_ = until;
    }
    if (!parser_->is_done()) return ReadBody();
    if (inflater_) {
      if (Status s = inflater_->Finish(); !s.ok()) return AnswerEarly(400, s.message());
    }
    // Idle keep-alive connections must not each keep 64 KiB (thousands of them are allowed).
    if (buffer_.capacity() > 4096) buffer_.shrink_to_fit();
    OnRead(ec);
  }

  // Answers before the whole request was read, then drops the rest of it and closes.
  void AnswerEarly(int status, const std::string& message,
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
    keep_alive_ = false;
    // What was read of the body goes now, not when the lingering close ends (up to 5 s later):
    // the memory is what the budget bounded.
    reservation_.Release();
    parser_.reset();
    inflater_.reset();
    std::string().swap(decoded_);
    buffer_ = beast::flat_buffer();
    discard_rest_ = true;
    Write(Response{status, "application/json", ErrorJson(message), std::move(headers)});
  }

  void OnRead(beast::error_code ec) {
    slot_->Busy();
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::ssl::error::stream_truncated) {  // a TLS client gone without close_notify
      return Close();
    }
    if (ec == bhttp::error::body_limit) {
      // Answered before the body: the rest is drained so that the 413 is not reset away.
      return AnswerEarly(413, "request body exceeds the limit of " +
                                  std::to_string(options_.max_body_bytes) + " bytes");
    }
    if (chunks_ > options_.max_body_chunks) {
      return AnswerEarly(413, "chunked request body in more than " +
                                  std::to_string(options_.max_body_chunks) + " chunks");
    }
    if (ec && !kTls && buffer_.size() > 0 &&
        *static_cast<const unsigned char*>(buffer_.data().data()) == 0x16) {
      // A TLS ClientHello: an HTTP answer would mean nothing to it.
      tls::CountTlsOnPlainPort(options_.listener);
      LOG_INFO(
          "a TLS client on the plain-text {} port (start the server with --http-use-ssl, or "
          "use http://); closing",
          options_.listener);
      return Close();
    }
    if (ec) {
      keep_alive_ = false;
      return Write(Response{400,
                            "application/json",
                            "{\"error\":\"malformed HTTP request: " + ec.message() + "\"}",
                            {}});
    }
    Tcp().expires_never();   // the handler may take as long as the model needs
    reservation_.Release();  // complete: the handler's now
    bhttp::request<bhttp::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    head_request_ = req.method() == bhttp::verb::head;
    if (req.version() >= 11 && req.find(bhttp::field::host) == req.end()) {
      // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host (nginx does).
      keep_alive_ = false;
      return Write(Response{
          400, "application/json", "{\"error\":\"HTTP/1.1 request without a Host header\"}", {}});
    }
    Request r;
    r.method = std::string(req.method_string().data(), req.method_string().size());
    std::string_view target(req.target().data(), req.target().size());
    auto q = target.find('?');
    r.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
    r.headers.reserve(static_cast<size_t>(std::distance(req.begin(), req.end())));
    for (const auto& f : req) {
      if (inflater_ && f.name() == bhttp::field::content_encoding) continue;  // decoded below
      r.headers.emplace_back(
          Lower(std::string_view(f.name_string().data(), f.name_string().size())),
          std::string(f.value().data(), f.value().size()));
    }
    r.body = inflater_ ? std::move(decoded_) : std::move(req.body());
    inflater_.reset();
    answer_coding_ = AnswerCoding(r.Header("accept-encoding"));
    // dispatch: an answer given on this connection's thread (the gateway's, a cached one) is
    // written right away; from another thread (a model instance's) it is queued to this one.
    handler_(std::move(r), [self = shared_from_this()](Response resp) {
      net::dispatch(self->stream_.get_executor(),
                    [self, resp = std::move(resp)]() mutable { self->Write(std::move(resp)); });
    });
  }

  // The sink of a streamed answer: writes queue on the connection's executor, one at a time.
  class Sink : public StreamSink {
   public:
    explicit Sink(std::shared_ptr<Session> session) : session_(std::move(session)) {}
    bool Send(std::string bytes) override {
      if (!open_.load()) return false;
      std::shared_ptr<Session> s = session_;
      net::dispatch(s->stream_.get_executor(), [this, self = shared(), b = std::move(bytes)] {
        if (!open_.load()) return;
        queue_.push_back(std::move(b));
        if (queue_.size() == 1) WriteNext();
      });
      return true;
    }
    bool open() const override { return open_.load(); }
    void Close() override {
      std::shared_ptr<Session> s = session_;
      net::dispatch(s->stream_.get_executor(), [this, self = shared()] { End(); });
    }
    // On the executor: the client sent something or went away (a stream reads nothing).
    void WatchPeer() {
      session_->Tcp().socket().async_wait(tcp::socket::wait_read,
                                          [self = shared()](beast::error_code) { self->End(); });
    }
    std::shared_ptr<Sink> shared() { return std::static_pointer_cast<Sink>(self_.lock()); }
    std::weak_ptr<StreamSink> self_;

   private:
    void WriteNext() {
      net::async_write(session_->stream_, net::buffer(queue_.front()),
                       [self = shared()](beast::error_code ec, size_t) {
                         if (ec) return self->End();
                         self->queue_.pop_front();
                         if (!self->queue_.empty()) self->WriteNext();
                       });
    }
    void End() {
      if (!open_.exchange(false)) return;
      session_->Close();
    }
    std::shared_ptr<Session> session_;
    std::atomic<bool> open_{true};
    std::deque<std::string> queue_;  // on the executor
  };

  void WriteStream(Response r) {
    std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " +
                       std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(r.status))) +
                       "\r\nServer: dais\r\nContent-Type: " + r.content_type +
                       "\r\nCache-Control: no-cache\r\nConnection: close\r\n";
    for (auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
    head += "\r\n";
    auto sink = std::make_shared<Sink>(shared_from_this());
    sink->self_ = sink;
    sink->Send(std::move(head));
    sink->WatchPeer();
    r.stream(std::move(sink));
  }

  // The head written into the connection's buffer and sent with the body in one gathered write.
  void Write(Response r) {
    if (r.stream) return WriteStream(std::move(r));
    std::string_view coding;
    const bool compress = r.compressible && r.body.size() >= options_.compress_min_bytes;
    if (compress && answer_coding_) {
      std::string packed = Deflate(r.body, *answer_coding_);
      if (!packed.empty() && packed.size() < r.body.size()) {
        r.body = std::move(packed);
        coding = ContentEncodingName(*answer_coding_);
      }
    }
    if (!StatusHasBody(r.status)) r.body.clear();
    WriteResponseHead(r, r.body.size(), keep_alive_, coding, compress, &head_);
    answer_body_ = std::move(r.body);
    // The answer to a HEAD: the head a GET would get (its Content-Length included), no body
    // (RFC 9110 §9.3.2; a client reads none, and the bytes would be taken for the next answer).
    if (head_request_) answer_body_.clear();
    const std::array<net::const_buffer, 2> out = {net::buffer(head_), net::buffer(answer_body_)};
    net::async_write(stream_, out, [self = shared_from_this()](beast::error_code ec, size_t) {
      std::string().swap(self->answer_body_);
      if (!ec && self->discard_rest_) return self->DiscardAndClose();
      if (ec || !self->keep_alive_) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  // Answered before the body was read: closing now, with the client's bytes unread, would send
  // a reset that can destroy the answer before the client reads it. So the sending side is shut
  // and the rest is read and dropped (not stored), for at most a few seconds (nginx's lingering
  // close).
  void DiscardAndClose() {
    Close();
    if (!discard_buf_) discard_buf_ = std::make_unique<std::array<char, kBodyReadBytes>>();
    Tcp().expires_after(std::chrono::seconds(kLingerSecs));
    stream_.async_read_some(net::buffer(*discard_buf_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->DiscardAndClose();
                            });
  }

  tls::SslCtxPtr generation_;  // HTTPS: the certificate generation this connection uses
  Stream stream_;
  tls::ServerContext* tls_;
  std::unique_ptr<tls::ServerContext::Handshake> handshake_;  // HTTPS: its slot
  std::optional<net::steady_timer> first_byte_timer_;         // HTTPS: until the first byte
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool head_request_ = false;  // the request being answered is a HEAD
  std::string head_;           // the answer's head being written (its capacity kept)
  std::string answer_body_;    // and its body
  const Handler& handler_;
  const ServerOptions& options_;
  std::unique_ptr<frontends::ConnectionLimiter::Slot> slot_;
  bool keep_alive_ = true;
  // The request being read: how many leading body bytes are JSON, how far they were scanned.
  uint64_t json_bytes_ = 0;
  uint64_t scanned_ = 0;
  std::optional<json::DepthScanner> scanner_;
  std::optional<Inflater> inflater_;         // the body came with Content-Encoding gzip / deflate
  std::string decoded_;                      // what it decompressed to so far
  std::optional<ZlibFormat> answer_coding_;  // the request's Accept-Encoding allows it
  bool served_ = false;  // a request head completed: no longer a silent connection
  uint64_t chunks_ = 0;
  // Counts a chunked body's chunks; past the limit the parser stops with an error.
  std::function<void(uint64_t, beast::string_view, beast::error_code&)> on_chunk_ =
      [this](uint64_t, beast::string_view, beast::error_code& ec) {
        if (++chunks_ > options_.max_body_chunks) ec = bhttp::error::bad_chunk;
      };
  bool discard_rest_ = false;       // answered early: drop the rest of the body, then close
  RequestReservation reservation_;  // of RequestMemory, for the body being read
  std::chrono::steady_clock::time_point body_since_;  // its head arrived
  uint64_t body_bytes_ = 0;                           // bytes read since
  bool arriving_ = false;                             // the body did not come whole with its head
  std::unique_ptr<std::array<char, kBodyReadBytes>> discard_buf_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  frontends::Listener listener;

  void OnConnection(tcp::socket s, std::unique_ptr<frontends::ConnectionLimiter::Slot> slot) {
    tls::ServerContext* tls = options.tls.get();
    if (tls == nullptr) {
      std::make_shared<Session<beast::tcp_stream>>(std::move(s), nullptr, handler, options,
                                                   std::move(slot))
          ->Start();
    } else {
      std::make_shared<Session<TlsStream>>(std::move(s), tls, handler, options, std::move(slot))
          ->Start();
    }
  }
};

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
}

Server::~Server() { Stop(); }

Status Server::Start() {
  Impl* impl = impl_.get();
  auto on_connection = [impl](tcp::socket s, auto slot) {
    impl->OnConnection(std::move(s), std::move(slot));
  };
  // No strand: each I/O thread runs an io_context of its own (listen.h), so a connection's
  // handlers already run one at a time, and an answer given on that thread is written at once.
  ASSIGN_OR_RETURN(port_, impl->listener.Start(impl->options, impl->options.listener, "HTTP",
                                               /*strand=*/false, on_connection));
  return OkStatus();
}

void Server::Post(std::function<void()> fn) { net::post(impl_->listener.ioc(), std::move(fn)); }

net::io_context& Server::io_context() { return impl_->listener.ioc(); }

void Server::StopAccepting() { impl_->listener.StopAccepting(); }

void Server::Stop() {
  if (!impl_ || !impl_->listener.running()) return;
  StopAccepting();
  impl_->listener.Join(/*stop_now=*/true);
}

}  // namespace dais::frontends::http
