#include "gateway/http1_response.h"

#include <llhttp.h>

#include "common/ascii.h"

namespace dais::gateway {

struct Http1ResponseParser::Llhttp {
  llhttp_t parser;
  llhttp_settings_t settings;
};

struct Http1ResponseParser::Callbacks {
  static Http1ResponseParser& Self(llhttp_t* p) {
    return *static_cast<Http1ResponseParser*>(p->data);
  }
  static int TooLarge(llhttp_t* p) {
    Self(p).too_large_ = true;
    llhttp_set_error_reason(p, "the answer exceeds the limit");
    return HPE_USER;
  }
  static int OnMessageBegin(llhttp_t* p) {
    Self(p).started_ = true;
    return 0;
  }
  // The head (and a chunked body's trailers) bounded like a request's: a node streaming header
  // lines would otherwise grow them until the deadline.
  static int Count(llhttp_t* p, size_t n) {
    Http1ResponseParser& self = Self(p);
    self.head_bytes_ += n;
    if (self.head_bytes_ <= kMaxHeadBytes && self.headers_.size() <= kMaxHeaders) return 0;
    llhttp_set_error_reason(p, "the answer's head exceeds 64 KiB or 100 lines");
    return HPE_USER;
  }
  static int OnHeaderField(llhttp_t* p, const char* at, size_t n) {
    Http1ResponseParser& self = Self(p);
    if (int e = Count(p, n); e != 0) return e;
    if (self.in_body_) return 0;
    if (self.in_value_ || self.headers_.empty()) {
      self.headers_.emplace_back();
      self.in_value_ = false;
    }
    std::string& name = self.headers_.back().first;
    const size_t from = name.size();  // a name can come in pieces
    name.append(at, n);
    for (size_t i = from; i < name.size(); ++i) name[i] = AsciiLower(name[i]);
    return 0;
  }
  static int OnHeaderValue(llhttp_t* p, const char* at, size_t n) {
    Http1ResponseParser& self = Self(p);
    if (int e = Count(p, n); e != 0) return e;
    if (self.in_body_) return 0;  // trailers after the body: not kept
    self.headers_.back().second.append(at, n);
    self.in_value_ = true;
    return 0;
  }
  static int OnHeaderValueComplete(llhttp_t* p) {
    Self(p).in_value_ = true;
    return 0;
  }
  static int OnHeadersComplete(llhttp_t* p) {
    Http1ResponseParser& self = Self(p);
    self.status_ = p->status_code;
    // No body, whatever Content-Length says (RFC 9110 §6.4.1): the answer to a HEAD, 1xx, 204,
    // 304 (llhttp 8 would wait for a 304's declared length).
    const bool bodiless =
        self.to_head_ || self.status_ / 100 == 1 || self.status_ == 204 || self.status_ == 304;
    if (!bodiless && (p->flags & F_CONTENT_LENGTH) != 0 &&
        p->content_length > self.max_body_bytes_) {
      return TooLarge(p);
    }
    // Trailer lines come through the header callbacks: dropped from here on.
    self.in_body_ = true;
    return bodiless ? 1 : 0;  // 1: no body
  }
  static int OnBody(llhttp_t* p, const char* at, size_t n) {
    Http1ResponseParser& self = Self(p);
    if (self.body_.size() + n > self.max_body_bytes_) return TooLarge(p);
    self.body_.append(at, n);
    return 0;
  }
  static int OnMessageComplete(llhttp_t* p) {
    Self(p).keep_alive_ = llhttp_should_keep_alive(p) != 0;
    return HPE_PAUSED;  // what follows is not this answer's
  }
};

Http1ResponseParser::Http1ResponseParser(uint64_t max_body_bytes)
    : llhttp_(std::make_unique<Llhttp>()), max_body_bytes_(max_body_bytes) {
  llhttp_settings_init(&llhttp_->settings);
  llhttp_->settings.on_message_begin = Callbacks::OnMessageBegin;
  llhttp_->settings.on_header_field = Callbacks::OnHeaderField;
  llhttp_->settings.on_header_value = Callbacks::OnHeaderValue;
  llhttp_->settings.on_header_value_complete = Callbacks::OnHeaderValueComplete;
  llhttp_->settings.on_headers_complete = Callbacks::OnHeadersComplete;
  llhttp_->settings.on_body = Callbacks::OnBody;
  llhttp_->settings.on_message_complete = Callbacks::OnMessageComplete;
  llhttp_init(&llhttp_->parser, HTTP_RESPONSE, &llhttp_->settings);
  llhttp_->parser.data = this;
}

Http1ResponseParser::~Http1ResponseParser() = default;

void Http1ResponseParser::Reset(bool to_head) {
  llhttp_reset(&llhttp_->parser);
  llhttp_->parser.data = this;
  to_head_ = to_head;
  started_ = in_value_ = in_body_ = too_large_ = keep_alive_ = false;
  status_ = 0;
  head_bytes_ = 0;
  headers_.clear();
  if (headers_.capacity() == 0) headers_.reserve(8);  // moved out with the last answer
  body_.clear();
  error_.clear();
}

Http1ResponseParser::Result Http1ResponseParser::Parse(std::string_view data) {
  llhttp_t* p = &llhttp_->parser;
  const llhttp_errno_t err = llhttp_execute(p, data.data(), data.size());
  if (err == HPE_OK) return {Stop::kNeedMore, data.size()};
  const char* pos = llhttp_get_error_pos(p);
  const size_t consumed =
      pos != nullptr && pos >= data.data() ? static_cast<size_t>(pos - data.data()) : 0;
  if (err == HPE_PAUSED) return {Stop::kComplete, consumed};
  const char* reason = llhttp_get_error_reason(p);
  error_ = std::string(llhttp_errno_name(err)) + ": " + (reason != nullptr ? reason : "malformed");
  return {Stop::kError, consumed};
}

Http1ResponseParser::Stop Http1ResponseParser::Finish() {
  if (!started_) return Stop::kNeedMore;
  const llhttp_errno_t err = llhttp_finish(&llhttp_->parser);
  if (err == HPE_PAUSED) return Stop::kComplete;  // delimited by the close: complete now
  const char* reason = err == HPE_OK ? nullptr : llhttp_get_error_reason(&llhttp_->parser);
  error_ = reason != nullptr ? std::string(llhttp_errno_name(err)) + ": " + reason
                             : "the connection closed before the answer ended";
  return Stop::kError;
}

}  // namespace dais::gateway
