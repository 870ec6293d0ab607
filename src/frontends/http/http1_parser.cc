#include "frontends/http/http1_parser.h"

#include <llhttp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/ascii.h"

namespace dais::frontends::http {
namespace {

// llhttp (strict mode) still takes a bare LF after the request line and as the head's last line,
// and obsolete line folding (a line starting with a space or tab continues the previous value,
// also an empty one). RFC 9112 §2.2 and §5.2 let a server refuse both, and a proxy must not pass
// on a head that a node could split into lines differently.
const char* LineEndingProblem(std::string_view head) {
  for (size_t i = head.find('\n'); i != std::string_view::npos; i = head.find('\n', i + 1)) {
    if (i == 0 || head[i - 1] != '\r') return "a bare LF line ending in the request head";
    if (i + 1 < head.size() && (head[i + 1] == ' ' || head[i + 1] == '\t')) {
      return "obsolete line folding in the request head";
    }
  }
  return nullptr;
}

}  // namespace

std::string_view Http1RequestHead::Find(std::string_view name) const {
  for (size_t i = 0; i < header_count; ++i) {
    if (EqualsIgnoreCase(headers[i].name, name)) return headers[i].value;
  }
  return {};
}

struct Http1RequestParser::Llhttp {
  llhttp_t parser;
  llhttp_settings_t settings;
};

// llhttp's callbacks: `parser->data` is the Http1RequestParser. A field split over two Parse
// calls arrives as two spans that touch (the caller keeps a head's bytes in place): Extend
// joins them.
struct Http1RequestParser::Callbacks {
  static Http1RequestParser& Self(llhttp_t* p) {
    return *static_cast<Http1RequestParser*>(p->data);
  }

  static int OnMethod(llhttp_t* p, const char* at, size_t n) {
    Extend(&Self(p).head_.method, at, n);
    return 0;
  }
  static int OnUrl(llhttp_t* p, const char* at, size_t n) {
    Extend(&Self(p).head_.target, at, n);
    return 0;
  }
  // A chunked body's trailer lines come through the header callbacks too, after the head: they
  // are forwarded with the body's bytes, not added to head(), and bounded like a head.
  static int Trailer(Http1RequestParser& self, llhttp_t* p, size_t n) {
    self.trailer_bytes_ += n;
    if (self.trailer_bytes_ > self.limits_.max_head_bytes) {
      self.error_status_ = 431;
      llhttp_set_error_reason(p, "trailer beyond the head limit");
      return HPE_USER;
    }
    return 0;
  }
  static int OnHeaderField(llhttp_t* p, const char* at, size_t n) {
    Http1RequestParser& self = Self(p);
    if (self.state_ != State::kHead) return Trailer(self, p, n);
    Http1RequestHead& h = self.head_;
    if (self.in_value_ || h.header_count == 0) {  // a new header line
      if (h.header_count == std::min(self.limits_.max_headers, h.headers.size())) {
        self.too_many_headers_ = true;
        llhttp_set_error_reason(p, "too many header lines");
        return HPE_USER;
      }
      h.headers[h.header_count++] = {};
      self.in_value_ = false;
    }
    Extend(&h.headers[h.header_count - 1].name, at, n);
    return 0;
  }
  static int OnHeaderValue(llhttp_t* p, const char* at, size_t n) {
    Http1RequestParser& self = Self(p);
    if (self.state_ != State::kHead) return Trailer(self, p, n);
    Http1RequestHead& h = self.head_;
    // An empty value gets no callback at all; a present one is joined across calls.
    Extend(&h.headers[h.header_count - 1].value, at, n);
    self.in_value_ = true;
    return 0;
  }
  static int OnHeaderValueComplete(llhttp_t* p) {
    Self(p).in_value_ = true;  // "Name:" with an empty value ends its line too
    return 0;
  }
  static int OnHeadersComplete(llhttp_t* p) {
    Http1RequestParser& self = Self(p);
    Http1RequestHead& h = self.head_;
    // llhttp skips the whitespace before a value but keeps the whitespace after it (RFC 9110
    // §5.5: not part of the value).
    for (size_t i = 0; i < h.header_count; ++i) {
      h.headers[i].value = TrimOws(h.headers[i].value);
    }
    h.version_major = p->http_major;
    h.version_minor = p->http_minor;
    h.chunked = (p->flags & F_CHUNKED) != 0;
    const bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
    if (has_length && p->content_length > self.limits_.max_body_bytes) {  // before any cast
      self.error_status_ = 413;
      llhttp_set_error_reason(p, "Content-Length beyond the body limit");
      return -1;
    }
    h.content_length = has_length ? static_cast<int64_t>(p->content_length) : -1;
    h.keep_alive = llhttp_should_keep_alive(p) != 0;
    h.expect_continue = EqualsIgnoreCase(TrimOws(h.Find("expect")), "100-continue");
    self.state_ = State::kBody;
    return HPE_PAUSED;  // the caller looks at the head before the body
  }
  static int OnBody(llhttp_t* p, const char* at, size_t n) {
    Http1RequestParser& self = Self(p);
    self.body_bytes_ += n;
    if (self.body_bytes_ > self.limits_.max_body_bytes) {
      self.error_status_ = 413;
      llhttp_set_error_reason(p, "body beyond the body limit");
      return HPE_USER;
    }
    if (self.body_sink_ != nullptr) self.body_sink_->append(at, n);
    return 0;
  }
  static int OnChunkHeader(llhttp_t* p) {
    Http1RequestParser& self = Self(p);
    if (++self.chunks_ > self.limits_.max_body_chunks) {
      self.error_status_ = 413;
      llhttp_set_error_reason(p, "more chunks than the limit");
      return HPE_USER;
    }
    return 0;
  }
  static int OnMessageComplete(llhttp_t* p) {
    Self(p).state_ = State::kDone;
    return HPE_PAUSED;  // a pipelined request after it waits for Reset()
  }
};

Http1RequestParser::Http1RequestParser(Http1Limits limits)
    : limits_(limits), llhttp_(std::make_unique<Llhttp>()) {
  llhttp_settings_init(&llhttp_->settings);
  llhttp_->settings.on_method = Callbacks::OnMethod;
  llhttp_->settings.on_url = Callbacks::OnUrl;
  llhttp_->settings.on_header_field = Callbacks::OnHeaderField;
  llhttp_->settings.on_header_value = Callbacks::OnHeaderValue;
  llhttp_->settings.on_header_value_complete = Callbacks::OnHeaderValueComplete;
  llhttp_->settings.on_headers_complete = Callbacks::OnHeadersComplete;
  llhttp_->settings.on_body = Callbacks::OnBody;
  llhttp_->settings.on_chunk_header = Callbacks::OnChunkHeader;
  llhttp_->settings.on_message_complete = Callbacks::OnMessageComplete;
  llhttp_init(&llhttp_->parser, HTTP_REQUEST, &llhttp_->settings);
  llhttp_->parser.data = this;
}

Http1RequestParser::~Http1RequestParser() = default;

void Http1RequestParser::Reset() {
  if (state_ == State::kError) return;  // the connection's framing is lost for good
  llhttp_reset(&llhttp_->parser);
  llhttp_->parser.data = this;
  // Every field as constructed but the header slots (64 of them, 2 KiB: clearing them showed in
  // the gateway's profile): only the first header_count are read, each cleared as a line starts.
  head_.method = head_.target = {};
  head_.version_major = head_.version_minor = 1;
  head_.header_count = 0;
  head_.head_bytes = 0;
  head_.content_length = -1;
  head_.chunked = false;
  head_.keep_alive = true;
  head_.expect_continue = false;
  state_ = State::kHead;
  in_value_ = false;
  too_many_headers_ = false;
  request_line_seen_ = false;
  request_line_started_ = false;
  body_bytes_ = 0;
  chunks_ = 0;
  framing_bytes_ = 0;
  body_sink_ = nullptr;
  trailer_bytes_ = 0;
  head_start_ = nullptr;
}

void Http1RequestParser::Extend(std::string_view* field, const char* at, size_t length) {
  if (field->empty()) {
    *field = std::string_view(at, length);
  } else {  // the next piece of a field split over two calls, right after the first
    *field = std::string_view(field->data(), static_cast<size_t>(at + length - field->data()));
  }
}

Http1RequestParser::Result Http1RequestParser::Fail(int status, std::string message,
                                                    size_t consumed) {
  state_ = State::kError;
  error_status_ = status;
  error_ = std::move(message);
  return {Stop::kError, consumed};
}

Http1RequestParser::Result Http1RequestParser::Parse(std::string_view data) {
  if (state_ == State::kError) return {Stop::kError, 0};
  if (state_ == State::kDone) return {Stop::kMessageComplete, 0};
  llhttp_t* p = &llhttp_->parser;
  const State before = state_;
  const uint64_t body_before = body_bytes_;
  if (before == State::kHead && head_start_ == nullptr) head_start_ = data.data();
  const llhttp_errno_t err = llhttp_execute(p, data.data(), data.size());
  size_t consumed = data.size();
  if (err != HPE_OK) {
    const char* pos = llhttp_get_error_pos(p);
    consumed = pos != nullptr && pos >= data.data() ? static_cast<size_t>(pos - data.data()) : 0;
  }
  if (before == State::kBody) {
    // What a chunked body sends besides its payload (size lines, extensions, CRLFs, trailers,
    // leading zeros) is skipped by llhttp without a callback for all of it: bounded here, or an
    // endless `1;;;;...` would hold a connection without a byte of payload (Node's
    // CVE-2024-22019).
    framing_bytes_ += consumed - static_cast<size_t>(body_bytes_ - body_before);
    if (framing_bytes_ > limits_.max_head_bytes + 64 * chunks_) {
      return Fail(400,
                  "chunk framing (sizes, extensions, trailers) beyond " +
                      std::to_string(limits_.max_head_bytes) + " bytes plus 64 per chunk",
                  consumed);
    }
  }
  if (before == State::kHead) {
    head_.head_bytes += consumed;
    if (head_.head_bytes > limits_.max_head_bytes) {
      return Fail(431, "request head beyond " + std::to_string(limits_.max_head_bytes) + " bytes",
                  consumed);
    }
    if (state_ == State::kBody) {  // the head ended here: its bytes are contiguous from the start
      if (const char* problem = LineEndingProblem({head_start_, head_.head_bytes})) {
        return Fail(400, problem, consumed);
      }
    }
  }
  if (err == HPE_PAUSED) {
    llhttp_resume(p);
    if (state_ == State::kDone) return {Stop::kMessageComplete, consumed};
    return {Stop::kHeadComplete, consumed};
  }
  if (err == HPE_OK) return {Stop::kNeedMore, consumed};
  if (too_many_headers_) {
    return Fail(431, "more than " + std::to_string(limits_.max_headers) + " header lines",
                consumed);
  }
  const int status = error_status_ != 0 ? error_status_ : 400;
  const char* reason = llhttp_get_error_reason(p);
  return Fail(status,
              std::string(llhttp_errno_name(err)) + ": " + (reason != nullptr ? reason : "refused"),
              consumed);
}

Http1RequestParser::Result Http1RequestParser::ParseInPlace(char* data, size_t size) {
  if (state_ != State::kHead || request_line_seen_) return Parse({data, size});
  // Empty lines before a request line are ignored (RFC 9112 §2.2; llhttp skips them too).
  size_t start = 0;
  if (!request_line_started_) {
    while (start < size && (data[start] == '\r' || data[start] == '\n')) ++start;
    request_line_started_ = start < size;
  }
  const char* newline = static_cast<const char*>(std::memchr(data + start, '\n', size - start));
  request_line_seen_ = newline != nullptr;
  const size_t line = newline != nullptr ? static_cast<size_t>(newline - data) : size;
  std::vector<std::pair<size_t, char>> hidden;  // allocates only for such a request line
  for (size_t i = start; i < line; ++i) {
    if (static_cast<unsigned char>(data[i]) >= 0x80) {
      hidden.emplace_back(i, data[i]);
      data[i] = '~';  // an unreserved URI character (RFC 3986 section 2.3)
    }
  }
  const Result r = Parse({data, size});
  for (const auto& [i, c] : hidden) data[i] = c;
  return r;
}

}  // namespace dais::frontends::http
