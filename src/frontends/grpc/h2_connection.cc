#include "frontends/grpc/h2_connection.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <vector>

#include "common/zlib_codec.h"
#include "dais/clock.h"
#include "frontends/request_memory.h"

namespace dais::frontends::grpc {

struct H2Connection::Stream {
  int32_t id = 0;
  std::string path;
  std::string http_method;
  std::string content_type;
  std::string encoding;         // grpc-encoding
  std::string accept_encoding;  // grpc-accept-encoding
  // The request's messages are compressed with this (grpc-encoding gzip / deflate), and so are
  // the answer's when the client accepts it back.
  std::optional<ZlibFormat> request_coding;
  std::optional<ZlibFormat> answer_coding;
  const Method* method = nullptr;
  std::shared_ptr<ServerCall> call;
  std::shared_ptr<StreamHandler> handler;
  // Input: bytes not yet cut into messages, and the unary request.
  std::string in;
  std::string request;
  int messages = 0;
  uint64_t held = 0;  // bytes received and not yet handed to the method (options' budget)
  // A request still arriving (a unary call before its end, a streaming call's partial message):
  // since when (NowNs; 0: none is) and how many bytes came since (EnforceMinRate).
  uint64_t arriving_since_ns = 0;
  uint64_t arrived = 0;
  bool refused = false;             // input ignored from now on
  bool reset_after_answer = false;  // refused while the client was still sending
  bool ended = false;               // the client half-closed
  // Output: framed messages not yet handed to nghttp2.
  std::string out;
  size_t out_pos = 0;
  bool response_started = false;
  bool finishing = false;  // Finish called: trailers follow the remaining output
  bool closed = false;     // trailers (or a Trailers-Only answer) submitted
  ::grpc::Status status;
  std::vector<std::pair<std::string, std::string>> response_metadata;
};

namespace {

constexpr size_t kFrameHeader = 5;  // compressed flag + big-endian length
// What dais decompresses (grpc-accept-encoding), and answers smaller than this go uncompressed.
constexpr std::string_view kAcceptEncoding = "identity,deflate,gzip";
constexpr size_t kCompressMinBytes = 256;

// A grpc-encoding value: nullopt for identity; false when unknown.
bool ParseCoding(std::string_view name, std::optional<ZlibFormat>* out) {
  if (name.empty() || name == "identity") {
    *out = std::nullopt;
  } else if (name == "gzip") {
    *out = ZlibFormat::kGzip;
  } else if (name == "deflate") {
    *out = ZlibFormat::kZlib;
  } else {
    return false;
  }
  return true;
}

// Whether a grpc-accept-encoding list names `coding`.
bool Accepts(std::string_view list, std::string_view coding) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == coding) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

// grpc-message is percent-encoded: bytes outside printable ASCII, and '%' itself. A message
// longer than kMaxGrpcMessageBytes is cut there (issue 32: an error echoing a 64 KB model name
// made headers no peer accepts, and the call hung until the client's deadline).
constexpr size_t kMaxGrpcMessageBytes = 1024;
std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string cut;
  if (s.size() > kMaxGrpcMessageBytes) {
    cut = std::string(s.substr(0, kMaxGrpcMessageBytes)) + "... (" +
          std::to_string(s.size() - kMaxGrpcMessageBytes) + " bytes cut)";
    s = cut;
  }
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// grpc-timeout: at most 8 digits and a unit (H M S m u n). 0 when absent or malformed.
uint64_t ParseTimeoutUs(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return 0;
  uint64_t n = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size() - 1, n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() - 1) return 0;
  // Unit -> nanoseconds it stands for.
  static constexpr std::pair<char, uint64_t> kUnitNs[] = {
      {'H', 3600'000'000'000ull}, {'M', 60'000'000'000ull}, {'S', 1'000'000'000ull},
      {'m', 1'000'000ull},        {'u', 1'000ull},          {'n', 1ull}};
  uint64_t us = 0;
  bool known = false;
  for (const auto& [unit, ns] : kUnitNs) {
    if (v.back() != unit) continue;
    known = true;
    us = ns >= 1000 ? n * (ns / 1000) : n / 1000;  // at most 8 digits: no overflow
  }
  if (!known) return 0;
  return std::max<uint64_t>(us, 1);
}

// A header that is the application's metadata, not the transport's (nghttp2 hands names in
// lower case).
bool IsCustomMetadata(std::string_view n) {
  return !n.empty() && n[0] != ':' && n != "te" && n != "user-agent" && n != "content-type" &&
         n.substr(0, 5) != "grpc-" && n != "accept-encoding";
}

}  // namespace

// nghttp2's C callbacks, forwarding to the connection (user_data).
struct H2Callbacks {
  static H2Connection* Conn(void* user_data) { return static_cast<H2Connection*>(user_data); }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto s = std::make_unique<H2Connection::Stream>();
    s->id = frame->hd.stream_id;
    // Arriving from its first header on: a HEADERS frame whose CONTINUATIONs never come must
    // not hold the connection for ever.
    s->arriving_since_ns = NowNs();
    Conn(user_data)->streams_[s->id] = std::move(s);
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                      void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    H2Connection::Stream* s = Conn(user_data)->Find(frame->hd.stream_id);
    if (!s) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":path") {
      s->path = v;
    } else if (n == ":method") {
      s->http_method = v;
    } else if (n == "content-type") {
      s->content_type = v;
    } else if (n == "grpc-encoding") {
      s->encoding = v;
    } else if (n == "grpc-accept-encoding") {
      s->accept_encoding = v;
    } else if (n == "grpc-timeout") {
      if (!s->call) s->call = std::make_shared<ServerCall>();
      if (uint64_t us = ParseTimeoutUs(v); us > 0) s->call->deadline_ns_ = NowNs() + us * 1000;
    } else if (IsCustomMetadata(n)) {
      if (!s->call) s->call = std::make_shared<ServerCall>();
      s->call->metadata_.emplace_back(n, v);
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    H2Connection* c = Conn(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) c->ping_acked_ = true;
        return 0;
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA:
        break;
      default:
        return 0;
    }
    H2Connection::Stream* s = c->Find(frame->hd.stream_id);
    if (!s) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      c->OnRequestHeaders(s);
    }
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && (s = c->Find(frame->hd.stream_id))) {
      c->OnEndStream(s);
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* user_data) {
    H2Connection* c = Conn(user_data);
    if (H2Connection::Stream* s = c->Find(stream_id)) c->OnData(s, data, len);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
    Conn(user_data)->OnStreamClose(stream_id);
    return 0;
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    H2Connection* c = Conn(user_data);
    if (frame->hd.type == NGHTTP2_DATA && frame->hd.length > 0) c->data_sent_ = true;
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      H2Connection::Stream* s = c->Find(frame->hd.stream_id);
      if (s && s->reset_after_answer && !s->ended) {
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
      }
    }
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user_data) {
    H2Connection* c = Conn(user_data);
    H2Connection::Stream* s = c->Find(stream_id);
    if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return c->ReadBody(s, buf, length, flags);
  }
};

uint64_t ServerCall::timeout_us() const {
  if (deadline_ns_ == 0) return 0;
  const uint64_t now = NowNs();
  return now >= deadline_ns_ ? 1 : std::max<uint64_t>((deadline_ns_ - now) / 1000, 1);
}

void ServerCall::Write(std::string message) {
  if (auto c = conn_.lock()) {
    c->RunOnExecutor(
        [c, id = stream_id_, m = std::move(message)]() mutable { c->DoWrite(id, std::move(m)); });
  }
}

void ServerCall::Finish(::grpc::Status status) {
  if (auto c = conn_.lock()) {
    c->RunOnExecutor(
        [c, id = stream_id_, st = std::move(status)]() mutable { c->DoFinish(id, std::move(st)); });
  }
}

void ServerCall::AddResponseMetadata(std::string name, std::string value) {
  if (auto c = conn_.lock()) {
    c->RunOnExecutor([c, id = stream_id_, n = std::move(name), v = std::move(value)]() mutable {
      H2Connection::Stream* s = c->Find(id);
      if (s && !s->response_started && !s->finishing) {
        s->response_metadata.emplace_back(std::move(n), std::move(v));
      }
    });
  }
}

void ServerCall::Reply(std::string message) {
  if (auto c = conn_.lock()) {
    c->RunOnExecutor([c, id = stream_id_, m = std::move(message)]() mutable {
      c->DoWrite(id, std::move(m));
      c->DoFinish(id, ::grpc::Status::OK);
    });
  }
}

std::optional<std::string_view> ServerCall::Metadata(std::string_view name) const {
  for (const auto& [k, v] : metadata_) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

void ServerCall::OnCancelled(std::function<void()> hook) {
  {
    std::lock_guard lock(cancel_mu_);
    if (!cancelled_->load()) {
      on_cancelled_ = std::move(hook);
      return;
    }
    on_cancelled_ = nullptr;
  }
  if (hook) hook();
}

void ServerCall::Cancel() {
  std::function<void()> hook;
  {
    std::lock_guard lock(cancel_mu_);
    cancelled_->store(true);
    hook = std::move(on_cancelled_);
    on_cancelled_ = nullptr;
  }
  if (hook) hook();
}

void ServerCall::ReplyEncoded(std::function<std::string()> encode) {
  if (auto c = conn_.lock()) {
    c->RunOnExecutor([c, id = stream_id_, encode = std::move(encode)] {
      if (!c->Find(id)) return;
      c->DoWrite(id, encode());
      c->DoFinish(id, ::grpc::Status::OK);
    });
  }
}

H2Connection::H2Connection(const MethodTable* methods, H2Options options, Post post)
    : methods_(methods), options_(options), post_(std::move(post)) {}

H2Connection::~H2Connection() {
  Abort();
  if (session_) nghttp2_session_del(session_);
}

Status H2Connection::Start() {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) return Internal("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, H2Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cb, H2Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, H2Callbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, H2Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, H2Callbacks::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, H2Callbacks::OnFrameSend);
  int rv = nghttp2_session_server_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return Internal(std::string("nghttp2: ") + nghttp2_strerror(rv));
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(options_.stream_window_bytes)},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        options_.connection_window_bytes);
  return OkStatus();
}

Status H2Connection::Receive(const uint8_t* data, size_t size) {
  ssize_t rv = nghttp2_session_mem_recv(session_, data, size);
  if (rv < 0) {
    if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) not_http2_ = true;
    return InvalidArgument(std::string("HTTP/2 protocol error: ") +
                           nghttp2_strerror(static_cast<int>(rv)));
  }
  return OkStatus();
}

void H2Connection::TakeOutput(std::string* out) {
  for (;;) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) break;
    out->append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
}

bool H2Connection::Done() const {
  return !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

void H2Connection::Shutdown() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void H2Connection::Abort() {
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, s] : streams) {
    if (s->call) s->call->Cancel();
    if (s->handler && !s->closed) s->handler->OnCancel();
  }
  RequestMemory::Global().Release(buffered_);
  buffered_ = 0;
}

bool H2Connection::AllArriving() const {
  if (streams_.empty()) return false;
  for (const auto& [id, s] : streams_) {
    if (s->arriving_since_ns == 0) return false;
  }
  return true;
}

bool H2Connection::AnyArriving() const {
  for (const auto& [id, s] : streams_) {
    if (s->arriving_since_ns != 0) return true;
  }
  return false;
}

int H2Connection::EnforceMinRate(uint64_t min_bytes_per_sec, int grace_secs) {
  if (min_bytes_per_sec == 0) return 0;
  const uint64_t now = NowNs();
  std::vector<Stream*> slow;
  for (const auto& [id, s] : streams_) {
    if (s->arriving_since_ns == 0 || s->refused) continue;
    const double late = static_cast<double>(now - s->arriving_since_ns) / 1e9 - grace_secs;
    if (late > 0 && static_cast<double>(s->arrived) < late * static_cast<double>(min_bytes_per_sec))
      slow.push_back(s.get());
  }
  for (Stream* s : slow) {
    // Its header block never completed: HTTP/2 allows no other frame before its CONTINUATION,
    // so the whole connection is stuck.
    if (!s->call) return -1;
  }
  for (Stream* s : slow) {
    const double secs = static_cast<double>(now - s->arriving_since_ns) / 1e9;
    Refuse(s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "the request arrived slower than the server's minimum of " +
                                 std::to_string(min_bytes_per_sec) + " bytes/s (" +
                                 std::to_string(s->arrived) + " bytes in " +
                                 std::to_string(static_cast<int>(secs)) + " s)"));
  }
  return static_cast<int>(slow.size());
}

void H2Connection::SendPing() {
  ping_acked_ = false;
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
}

bool H2Connection::TakeDataSent() { return std::exchange(data_sent_, false); }

H2Connection::Stream* H2Connection::Find(int32_t id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

void H2Connection::RunOnExecutor(std::function<void()> fn) { post_(std::move(fn)); }

void H2Connection::OnRequestHeaders(Stream* s) {
  if (!s->call) s->call = std::make_shared<ServerCall>();
  s->call->conn_ = weak_from_this();
  s->call->stream_id_ = s->id;
  if (s->http_method != "POST") {
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                    "gRPC calls are POST requests, not " + s->http_method));
  }
  std::string_view ct = s->content_type;
  if (ct.substr(0, 16) != "application/grpc" ||
      (ct.size() > 16 && ct[16] != '+' && ct[16] != ';')) {
    // The specification answers a request that is not gRPC with HTTP 415.
    s->closed = true;
    s->refused = true;
    s->arriving_since_ns = 0;
    const nghttp2_nv nv[] = {Header(":status", "415"), Header("content-type", "text/plain")};
    nghttp2_submit_response(session_, s->id, nv, std::size(nv), nullptr);
    return;
  }
  auto it = methods_->find(s->path);
  if (it == methods_->end()) {
    return Refuse(s,
                  ::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                 "unknown method " + s->path + " (dais serves " +
                                     "inference.GRPCInferenceService and grpc.health.v1.Health)"));
  }
  s->method = &it->second;
  if (!ParseCoding(s->encoding, &s->request_coding)) {
    // The specification: UNIMPLEMENTED, with grpc-accept-encoding naming what is supported.
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                    "message compression grpc-encoding: " + s->encoding +
                                        " is not supported (dais accepts " +
                                        std::string(kAcceptEncoding) + ")"));
  }
  if (s->request_coding && Accepts(s->accept_encoding, s->encoding)) {
    s->answer_coding = s->request_coding;
  }
  if (s->method->admit) {
    if (::grpc::Status st = s->method->admit(*s->call); !st.ok()) return Refuse(s, std::move(st));
  }
  if (s->method->stream) {
    s->handler = s->method->stream(s->call);
    s->arriving_since_ns = 0;  // until its first message begins (OnData)
  }                            // a unary call arrives until its end (OnEndStream)
}

void H2Connection::OnData(Stream* s, const uint8_t* data, size_t size) {
  if (s->refused || !s->method) return;
  if (buffered_ + size > options_.max_buffered_bytes) {
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    "this connection already holds " + std::to_string(buffered_) +
                                        " bytes of unfinished requests (limit " +
                                        std::to_string(options_.max_buffered_bytes) +
                                        "): send large requests one after another or on more "
                                        "connections"));
  }
  if (!RequestMemory::Global().TryReserve(size, options_.listener)) {
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                                    "the server's budget for requests still arriving (" +
                                        std::to_string(RequestMemory::Global().limit()) +
                                        " bytes, --max-buffered-request-bytes) is spent; retry "
                                        "later"));
  }
  s->held += size;
  buffered_ += size;
  s->arrived += size;
  if (s->handler && s->arriving_since_ns == 0) s->arriving_since_ns = NowNs();
  s->in.append(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  while (s->in.size() - pos >= kFrameHeader) {
    const auto* p = reinterpret_cast<const uint8_t*>(s->in.data() + pos);
    const uint32_t len =
        (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | uint32_t{p[4]};
    if (len > options_.max_receive_message_bytes) {
      return Refuse(
          s, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "received message larger than max (" + std::to_string(len) + " vs. " +
                                std::to_string(options_.max_receive_message_bytes) + ")"));
    }
    if (p[0] > 1) {
      return Refuse(
          s, ::grpc::Status(::grpc::StatusCode::INTERNAL, "a message's compressed flag is " +
                                                              std::to_string(p[0]) + " (0 or 1)"));
    }
    if (p[0] == 1 && !s->request_coding) {
      return Refuse(s, ::grpc::Status(::grpc::StatusCode::INTERNAL,
                                      "a message has the compressed flag set but the call has no "
                                      "grpc-encoding"));
    }
    if (s->in.size() - pos - kFrameHeader < len) break;  // (no reserve of the claimed length)
    std::string message = s->in.substr(pos + kFrameHeader, len);
    pos += kFrameHeader + len;
    if (p[0] == 1) {
      // Bounded like an uncompressed message: a small gzip bomb stops at the limit.
      Inflater inflater(*s->request_coding, options_.max_receive_message_bytes);
      std::string plain;
      Status st = inflater.Feed(message, &plain);
      if (st.ok()) st = inflater.Finish();
      if (!st.ok()) {
        const bool big = st.code() == StatusCode::kResourceExhausted;
        return Refuse(
            s, ::grpc::Status(
                   big ? ::grpc::StatusCode::RESOURCE_EXHAUSTED : ::grpc::StatusCode::INTERNAL,
                   big ? "decompressed message larger than max (" +
                             std::to_string(options_.max_receive_message_bytes) + ")"
                       : "cannot decompress a " + s->encoding +
                             " message: " + std::string(st.message())));
      }
      message = std::move(plain);
    }
    if (s->handler) {
      const int32_t id = s->id;
      Release(s, kFrameHeader + len);
      s->handler->OnMessage(std::move(message));
      if (!(s = Find(id)) || s->refused) return;
    } else if (s->messages++ == 0) {
      s->request = std::move(message);
    } else {
      return Refuse(s, ::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                      "a unary call carries one request message, this one more"));
    }
  }
  s->in.erase(0, pos);
  if (s->handler && s->in.empty()) s->arriving_since_ns = 0, s->arrived = 0;  // between messages
}

void H2Connection::OnEndStream(Stream* s) {
  s->ended = true;
  s->arriving_since_ns = 0;
  if (s->refused || !s->method) return;
  if (!s->in.empty()) {
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::INTERNAL,
                                    "the request ended inside a message (" +
                                        std::to_string(s->in.size()) + " bytes of a frame)"));
  }
  if (s->handler) return s->handler->OnHalfClose();
  if (s->messages == 0) {
    return Refuse(s, ::grpc::Status(::grpc::StatusCode::UNIMPLEMENTED,
                                    "a unary call needs one request message, this one has none"));
  }
  Release(s, s->held);
  s->method->unary(s->call, std::move(s->request));
}

void H2Connection::Release(Stream* s, uint64_t bytes) {
  bytes = std::min(bytes, s->held);
  s->held -= bytes;
  buffered_ -= bytes;
  RequestMemory::Global().Release(bytes);
}

void H2Connection::OnStreamClose(int32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  std::unique_ptr<Stream> s = std::move(it->second);
  streams_.erase(it);
  buffered_ -= s->held;
  RequestMemory::Global().Release(s->held);
  if (s->call && !s->closed) s->call->Cancel();
  if (s->handler && !s->closed) s->handler->OnCancel();
}

void H2Connection::Refuse(Stream* s, ::grpc::Status status) {
  s->refused = true;
  s->arriving_since_ns = 0;
  s->in.clear();
  s->request.clear();
  Release(s, s->held);
  if (s->call) s->call->Cancel();
  // The client is still sending: once the answer is out, RST_STREAM(NO_ERROR) tells it to stop
  // (submitted now, nghttp2 would send it before the answer's HEADERS and drop them).
  s->reset_after_answer = !s->ended;
  DoFinish(s->id, std::move(status));
}

void H2Connection::StartResponse(Stream* s) {
  s->response_started = true;
  std::vector<nghttp2_nv> nv = {Header(":status", "200"),
                                Header("content-type", "application/grpc"),
                                Header("grpc-accept-encoding", kAcceptEncoding)};
  if (s->answer_coding) nv.push_back(Header("grpc-encoding", s->encoding));
  for (const auto& [k, v] : s->response_metadata) nv.push_back(Header(k, v));
  nghttp2_data_provider body{};
  body.read_callback = H2Callbacks::ReadBody;
  nghttp2_submit_response(session_, s->id, nv.data(), nv.size(), &body);
}

void H2Connection::DoWrite(int32_t id, std::string message) {
  Stream* s = Find(id);
  if (!s || s->finishing) return;
  if (message.size() > options_.max_send_message_bytes) {
    return DoFinish(
        id, ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "response message larger than max (" + std::to_string(message.size()) +
                               " vs. " + std::to_string(options_.max_send_message_bytes) + ")"));
  }
  char compressed = 0;
  if (s->answer_coding && message.size() >= kCompressMinBytes) {
    std::string packed = Deflate(message, *s->answer_coding);
    if (!packed.empty() && packed.size() < message.size()) {
      message = std::move(packed);
      compressed = 1;
    }
  }
  const uint32_t len = static_cast<uint32_t>(message.size());
  const char header[kFrameHeader] = {compressed, static_cast<char>(len >> 24),
                                     static_cast<char>(len >> 16), static_cast<char>(len >> 8),
                                     static_cast<char>(len)};
  if (s->out.empty()) {
    // The common case, one message: no copy of `message` beyond the 5-byte header.
    message.insert(0, header, kFrameHeader);
    s->out = std::move(message);
    s->out_pos = 0;
  } else {
    s->out.append(header, kFrameHeader);
    s->out.append(message);
  }
  if (!s->response_started) {
    StartResponse(s);
  } else {
    nghttp2_session_resume_data(session_, id);
  }
}

void H2Connection::DoFinish(int32_t id, ::grpc::Status status) {
  Stream* s = Find(id);
  if (!s || s->finishing) return;
  s->finishing = true;
  s->status = std::move(status);
  if (s->response_started) {
    nghttp2_session_resume_data(session_, id);
    return;
  }
  // Trailers-Only: one HEADERS frame with the status, ending the stream.
  s->closed = true;
  const std::string code = std::to_string(static_cast<int>(s->status.error_code()));
  const std::string message = PercentEncode(s->status.error_message());
  std::vector<nghttp2_nv> nv = {
      Header(":status", "200"), Header("content-type", "application/grpc"),
      Header("grpc-status", code), Header("grpc-accept-encoding", kAcceptEncoding)};
  if (!message.empty()) nv.push_back(Header("grpc-message", message));
  for (const auto& [k, v] : s->response_metadata) nv.push_back(Header(k, v));
  nghttp2_submit_response(session_, id, nv.data(), nv.size(), nullptr);
}

long H2Connection::ReadBody(Stream* s, uint8_t* buf, size_t length, uint32_t* flags) {
  const size_t n = std::min(length, s->out.size() - s->out_pos);
  if (n > 0) std::memcpy(buf, s->out.data() + s->out_pos, n);
  s->out_pos += n;
  if (s->out_pos == s->out.size()) {
    s->out.clear();
    s->out_pos = 0;
    if (!s->finishing)
      return n > 0 ? static_cast<long>(n) : static_cast<long>(NGHTTP2_ERR_DEFERRED);
    // All written: the trailers end the stream.
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    s->closed = true;
    const std::string code = std::to_string(static_cast<int>(s->status.error_code()));
    const std::string message = PercentEncode(s->status.error_message());
    std::vector<nghttp2_nv> nv = {Header("grpc-status", code)};
    if (!message.empty()) nv.push_back(Header("grpc-message", message));
    nghttp2_submit_trailer(session_, s->id, nv.data(), nv.size());
  }
  return static_cast<long>(n);
}

::grpc::StatusCode CodeOfHttpStatus(int http_status) {
  switch (http_status) {
    case 400:
      return ::grpc::StatusCode::INVALID_ARGUMENT;
    case 401:
      return ::grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return ::grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return ::grpc::StatusCode::NOT_FOUND;
    case 409:
      return ::grpc::StatusCode::ABORTED;
    case 429:
      return ::grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 502:
    case 503:
      return ::grpc::StatusCode::UNAVAILABLE;
    case 504:
      return ::grpc::StatusCode::DEADLINE_EXCEEDED;
    default:
      return ::grpc::StatusCode::INTERNAL;
  }
}

}  // namespace dais::frontends::grpc
