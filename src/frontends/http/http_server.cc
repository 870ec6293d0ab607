#include "frontends/http/http_server.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <cstring>
#include <deque>
#include <limits>

#include "common/ascii.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/zlib_codec.h"
#include "frontends/connection_limit.h"
#include "frontends/http/content_coding.h"
#include "frontends/http/http1_parser.h"
#include "frontends/http/infer_codec.h"
#include "frontends/http/response_head.h"
#include "frontends/listen.h"
#include "frontends/request_memory.h"
#include "frontends/write_now.h"
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

constexpr size_t kFirstReadBytes = 4096;  // a connection's read buffer (a head grows it)
constexpr size_t kBodyReadBytes = 64 * 1024;
constexpr int kLingerSecs = 5;

// A header name as handlers look it up (lower case).
std::string LowerName(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using Parser = Http1RequestParser;

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
        slot_(std::move(slot)),
        parser_(Http1Limits{.max_head_bytes = 64 * 1024,
                            .max_headers = 64,
                            .max_body_bytes = options.max_body_bytes,
                            .max_body_chunks = options.max_body_chunks}) {}

  // On the accepting thread: the connection is idle (may make room for another) from now, not
  // only once its own I/O thread has started reading.
  void Start() {
    slot_->SetCloser([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) {
        net::post(self->stream_.get_executor(), [self] { self->Tcp().close(); });
      }
    });
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

  void MarkIdle() { slot_->Idle(); }  // the closer set in Start

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

  // The next request: what is left of the last read (a pipelined request) moves to the front of
  // the buffer, where its head is parsed in place.
  void Read() {
    head_request_ = false;
    answer_coding_.reset();
    inflater_.reset();
    if (in_pos_ > 0) {
      std::memmove(in_.data(), in_.data() + in_pos_, in_len_ - in_pos_);
      in_len_ -= in_pos_;
      in_pos_ = 0;
    }
    fed_ = 0;
    parser_.Reset();
    // An idle keep-alive connection, or a client that stalls mid-request, is closed after this,
    // or earlier when the listener is at its connection limit and this one has waited longest.
    const bool silent_under_pressure = !served_ && slot_->UnderPressure();
    Tcp().expires_after(std::chrono::seconds(
        silent_under_pressure
            ? std::min(options_.idle_timeout_secs, options_.header_timeout_under_pressure_secs)
            : options_.idle_timeout_secs));
    MarkIdle();
    ParseHead();
  }

  // The head's bytes stay where they arrived (the parser's fields point into them) until the
  // buffer is full: then it grows, and the head is parsed again from its start (a few times at
  // most: the buffer doubles, up to the head limit).
  void ParseHead() {
    if (fed_ < in_len_) {
      const auto r = parser_.ParseInPlace(in_.data() + fed_, in_len_ - fed_);
      if (r.stop == Parser::Stop::kError) return OnParseError();
      if (r.stop != Parser::Stop::kNeedMore) {
        in_pos_ = fed_ + r.consumed;
        return OnHead();
      }
      fed_ = in_len_;
    }
    if (in_len_ == in_.size()) {
      std::string bigger(std::max<size_t>(kFirstReadBytes, in_.size() * 2), '\0');
      std::memcpy(bigger.data(), in_.data(), in_len_);
      in_.swap(bigger);
      parser_.Reset();
      fed_ = 0;
      if (in_len_ > 0) return ParseHead();
    }
    stream_.async_read_some(net::buffer(in_.data() + in_len_, in_.size() - in_len_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnReadError(ec);
                              self->in_len_ += n;
                              self->ParseHead();
                            });
  }

  // The head is in: the request is built from it, then the body (if any) is read piece by piece,
  // so that a JSON body nested deeper than the limit is refused after its first bytes rather
  // than read whole (issue 11: 40 MB of '[' took 11.7 s before its 400).
  void OnHead() {
    slot_->Busy();
    served_ = true;
    const Http1RequestHead& h = parser_.head();
    // llhttp has refused a final coding other than chunked; another coding before it is ours,
    // and so is an empty Transfer-Encoding (llhttp frames such a request by its Content-Length).
    bool has_te = false, has_host = false;
    std::string all_te;
    for (size_t i = 0; i < h.header_count; ++i) {
      has_host = has_host || EqualsIgnoreCase(h.headers[i].name, "host");
      if (!EqualsIgnoreCase(h.headers[i].name, "transfer-encoding")) continue;
      if (has_te) all_te += ',';
      has_te = true;
      all_te += h.headers[i].value;
    }
    if (has_te) {
      if (Status st = CheckTransferEncoding(all_te); !st.ok()) {
        return AnswerEarly(st.code() == StatusCode::kUnimplemented ? 501 : 400, st.message());
      }
    }
    if (h.method == "CONNECT") {
      // llhttp ends a CONNECT at its head (what follows is the tunnel's): no server role tunnels.
      return AnswerEarly(501, "CONNECT is not supported");
    }
    if ((h.version_major > 1 || (h.version_major == 1 && h.version_minor >= 1)) && !has_host) {
      // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host (nginx does).
      return AnswerEarly(400, "HTTP/1.1 request without a Host header");
    }
    // The head's views point into the read buffer, which the body's reads reuse: the request
    // takes copies now.
    keep_alive_ = h.keep_alive;
    head_request_ = h.method == "HEAD";
    request_ = Request{};
    request_.method = std::string(h.method);
    const auto q = h.target.find('?');
    request_.path = std::string(h.target.substr(0, q));
    if (q != std::string_view::npos) request_.query = std::string(h.target.substr(q + 1));
    json_bytes_ = std::numeric_limits<uint64_t>::max();
    if (std::string_view ihcl = h.Find("inference-header-content-length"); !ihcl.empty()) {
      // Binary tensor extension: only the first N bytes are JSON (a malformed value is the
      // handler's 400; scan nothing here).
      uint64_t n = 0;
      auto r = std::from_chars(ihcl.data(), ihcl.data() + ihcl.size(), n);
      json_bytes_ = r.ec == std::errc() && r.ptr == ihcl.data() + ihcl.size() ? n : 0;
    } else if (h.Find("content-type").find("octet-stream") != std::string_view::npos) {
      json_bytes_ = 0;
    }
    std::string().swap(decoded_);
    if (std::string_view ce = h.Find("content-encoding"); !ce.empty()) {
      auto coding = RequestCoding(ce);
      if (!coding.ok()) {
        // RFC 9110 §15.5.16: a 415 for a content coding names the ones accepted.
        return AnswerEarly(415, coding.status().message(), {{"Accept-Encoding", "gzip, deflate"}});
      }
      if (*coding) inflater_.emplace(**coding, options_.max_body_bytes);
    }
    request_.headers.reserve(h.header_count);
    for (size_t i = 0; i < h.header_count; ++i) {
      const Http1Header& f = h.headers[i];
      if (inflater_ && EqualsIgnoreCase(f.name, "content-encoding")) continue;  // decoded below
      request_.headers.emplace_back(LowerName(f.name), std::string(f.value));
    }
    wire_.clear();
    if (!h.chunked && h.content_length <= 0) return Complete();
    // A body that came whole with its head (most requests) is in memory already and takes no
    // time to arrive. Any other is bounded by the process's budget for requests still arriving
    // (a known length reserved whole before a byte of it is read, a chunked one as it comes:
    // OnBody), and may be closed for room, the slowest first, while it arrives.
    const uint64_t here = in_len_ - in_pos_;
    arriving_ = h.chunked || static_cast<uint64_t>(h.content_length) > here;
    if (h.content_length > 0) {
      if (arriving_ &&
          !reservation_.Hold(static_cast<uint64_t>(h.content_length), options_.listener)) {
        return RefuseForMemory();
      }
      wire_.reserve(static_cast<size_t>(h.content_length));
    }
    if (arriving_) {
      body_since_ = std::chrono::steady_clock::now();
      body_bytes_ = here;
      slot_->Receiving();
    }
    scanner_.emplace(options_.max_json_depth);
    scanned_ = 0;
    parser_.set_body_sink(&wire_);
    if (arriving_ && h.expect_continue) {
      // RFC 9110 §10.1.1: curl and other clients wait (curl: 1 s) for this before the body.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (ec) return self->Close();
                                self->ParseBody();
                              });
    }
    ParseBody();
  }

  // The body's bytes in the buffer go through the parser (its payload appended to wire_), then
  // the buffer is read into again from its start until the message ends.
  void ParseBody() {
    auto stop = Parser::Stop::kNeedMore;
    if (in_pos_ < in_len_) {
      const auto r = parser_.Parse({in_.data() + in_pos_, in_len_ - in_pos_});
      in_pos_ += r.consumed;
      stop = r.stop;
      if (stop == Parser::Stop::kError) return OnParseError();
    } else {
      // A body already whole ends on an empty call.
      stop = parser_.Parse({in_.data() + in_pos_, 0}).stop;
      if (stop == Parser::Stop::kError) return OnParseError();
    }
    const bool complete = stop == Parser::Stop::kMessageComplete;
    if (!OnBody(complete)) return;
    if (complete) return Complete();
    in_pos_ = in_len_ = 0;
    // Reads of at least 64 KiB while a body comes in (40 MB in 640 reads, not 80,000).
    if (in_.size() < kBodyReadBytes) std::string(kBodyReadBytes, '\0').swap(in_);
    if (arriving_) Tcp().expires_at(BodyDeadline());
    stream_.async_read_some(net::buffer(in_.data(), in_.size()),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnBodyReadError(ec);
                              self->in_len_ = n;
                              self->body_bytes_ += n;
                              if (self->arriving_) self->slot_->Progress(n);
                              self->ParseBody();
                            });
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

  void OnBodyReadError(beast::error_code ec) {
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
    OnReadError(ec);
  }

  // The payload that came since the last call (wire_): decompressed, bounded by the memory
  // budget, scanned for depth. False when the request was answered early.
  bool OnBody(bool complete) {
    if (inflater_) {
      // Decompressed as it arrives; the compressed bytes are dropped once inflated.
      Status s = inflater_->Feed(wire_, &decoded_);
      wire_.clear();
      if (!s.ok()) {
        AnswerEarly(s.code() == StatusCode::kResourceExhausted ? 413 : 400, s.message());
        return false;
      }
    }
    const std::string& body = inflater_ ? decoded_ : wire_;
    // What the body's strings and the read buffer have allocated, not only what they hold: a
    // string grows by doubling, so 17 MB of body may sit in 32 MiB.
    if (arriving_) {
      const uint64_t allocated = wire_.capacity() + decoded_.capacity() + in_.capacity();
      if (allocated > reservation_.held() &&
          !reservation_.Hold(allocated + kBodyReadBytes, options_.listener)) {
        RefuseForMemory();
        return false;
      }
    }
    // The depth scan exists to stop reading a hostile body early; on the last piece there is
    // nothing left to read, and the JSON parser applies the same limit.
    const uint64_t until = std::min<uint64_t>(body.size(), json_bytes_);
    if (until > scanned_ && !complete) {
      if (!scanner_->Feed(std::string_view(body).substr(scanned_, until - scanned_))) {
        AnswerEarly(400, "JSON nested deeper than " + std::to_string(scanner_->max_depth()) +
                             " levels at offset " + std::to_string(scanner_->offset()));
        return false;
      }
      scanned_ = until;
    }
    return true;
  }

  // Answers before the whole request was read, then drops the rest of it and closes.
  void AnswerEarly(int status, const std::string& message,
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
    keep_alive_ = false;
    // What was read of the body goes now, not when the lingering close ends (up to 5 s later):
    // the memory is what the budget bounded.
    reservation_.Release();
    inflater_.reset();
    std::string().swap(decoded_);
    std::string().swap(wire_);
    std::string().swap(in_);
    in_len_ = in_pos_ = fed_ = 0;
    discard_rest_ = true;
    Write(Response{status, "application/json", ErrorJson(message), std::move(headers)});
  }

  void OnReadError(beast::error_code) {
    // The client went away, closed, stalled past its timeout or reset: nothing to answer.
    slot_->Busy();
    Close();
  }

  void OnParseError() {
    slot_->Busy();
    const int status = parser_.error_status();
    if (!kTls && !served_ && in_len_ > 0 && static_cast<unsigned char>(in_[0]) == 0x16) {
      // A TLS ClientHello: an HTTP answer would mean nothing to it.
      tls::CountTlsOnPlainPort(options_.listener);
      LOG_INFO(
          "a TLS client on the plain-text {} port (start the server with --http-use-ssl, or "
          "use http://); closing",
          options_.listener);
      return Close();
    }
    if (status == 413 && parser_.chunks() > options_.max_body_chunks) {
      return AnswerEarly(413, "chunked request body in more than " +
                                  std::to_string(options_.max_body_chunks) + " chunks");
    }
    if (status == 413) {
      // Answered before the body: the rest is drained so that the 413 is not reset away.
      return AnswerEarly(413, "request body exceeds the limit of " +
                                  std::to_string(options_.max_body_bytes) + " bytes");
    }
    AnswerEarly(status, "malformed HTTP request: " + parser_.error());
  }

  // The whole request is in: to the handler.
  void Complete() {
    // Serving: never closed for room (a body that was arriving leaves the receiving list; any
    // other request has been busy since its head).
    if (arriving_) slot_->Busy();
    if (inflater_) {
      if (Status s = inflater_->Finish(); !s.ok()) return AnswerEarly(400, s.message());
    }
    // Idle keep-alive connections must not each keep 64 KiB (thousands of them are allowed).
    if (in_.size() > kFirstReadBytes && in_len_ - in_pos_ <= kFirstReadBytes) {
      std::string smaller(kFirstReadBytes, '\0');
      std::memcpy(smaller.data(), in_.data() + in_pos_, in_len_ - in_pos_);
      in_.swap(smaller);
      in_len_ -= in_pos_;
      in_pos_ = 0;
    }
    parser_.set_body_sink(nullptr);
    Tcp().expires_never();   // the handler may take as long as the model needs
    reservation_.Release();  // complete: the handler's now
    arriving_ = false;
    request_.body = inflater_ ? std::move(decoded_) : std::move(wire_);
    inflater_.reset();
    answer_coding_ = AnswerCoding(request_.Header("accept-encoding"));
    // dispatch: an answer given on this connection's thread (the gateway's, a cached one) is
    // written right away; from another thread (a model instance's) it is queued to this one.
    handler_(std::move(request_), [self = shared_from_this()](Response resp) {
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
    auto written = [self = shared_from_this()](beast::error_code ec, size_t) {
      std::string().swap(self->answer_body_);
      if (!ec && self->discard_rest_) return self->DiscardAndClose();
      if (ec || !self->keep_alive_) return self->Close();
      self->Read();
    };
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      // Plain TCP: sent at once when the socket takes it (write_now.h); the rest through the
      // stream, under a timeout armed only then.
      WriteNow(Tcp().socket(), stream_, out, &inline_writes_, std::move(written),
               [this](size_t left) { ArmWriteTimeout(left); });
    } else {
      ArmWriteTimeout(net::buffer_size(out));
      net::async_write(stream_, out, std::move(written));
    }
  }

  // An answer the client does not take (it stopped reading, or reads slower than it sends
  // requests) is given up, and the connection closed: its rest must be read within the idle
  // timeout plus the time it takes at the minimum rate of requests
  // (--min-request-bytes-per-sec; 0: the idle timeout alone). The stream's timeout was cleared
  // when the request completed (the handler may take its time).
  void ArmWriteTimeout(uint64_t bytes_left) {
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(options_.idle_timeout_secs);
    if (options_.min_request_bytes_per_sec > 0) {
      timeout += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(static_cast<double>(bytes_left) /
                                        static_cast<double>(options_.min_request_bytes_per_sec)));
    }
    Tcp().expires_after(timeout);
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
    if (!discard_buf_) {
      discard_buf_ = std::make_unique<std::array<char, kBodyReadBytes>>();
      // In all, not per read (nginx's lingering_time): a client that keeps sending is cut off.
      Tcp().expires_after(std::chrono::seconds(kLingerSecs));
    }
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
  bool head_request_ = false;  // the request being answered is a HEAD
  std::string head_;           // the answer's head being written (its capacity kept)
  int inline_writes_ = 0;      // WriteNow's nesting
  std::string answer_body_;    // and its body
  const Handler& handler_;
  const ServerOptions& options_;
  std::unique_ptr<frontends::ConnectionLimiter::Slot> slot_;
  // The read buffer: [in_pos_, in_len_) not yet parsed (a head: from 0, fed_ of it given to the
  // parser so far).
  std::string in_ = std::string(kFirstReadBytes, '\0');
  size_t in_len_ = 0, in_pos_ = 0, fed_ = 0;
  Parser parser_;
  Request request_;   // being read (its head copied out of the buffer)
  std::string wire_;  // the body's payload as it came (compressed if Content-Encoding)
  bool keep_alive_ = true;
  // The request being read: how many leading body bytes are JSON, how far they were scanned.
  uint64_t json_bytes_ = 0;
  uint64_t scanned_ = 0;
  std::optional<json::DepthScanner> scanner_;
  std::optional<Inflater> inflater_;         // the body came with Content-Encoding gzip / deflate
  std::string decoded_;                      // what it decompressed to so far
  std::optional<ZlibFormat> answer_coding_;  // the request's Accept-Encoding allows it
  bool served_ = false;             // a request head completed: no longer a silent connection
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
