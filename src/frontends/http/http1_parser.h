// HTTP/1.1 request framing for the gateway's forwarding path, on llhttp (the parser of Node.js;
// Debian's node-llhttp ships its C sources): where a request's head ends, what it says, and
// where its body ends, without copying or allocating. docs/gateway.md ("The request parser")
// says why llhttp and not Beast's basic_parser.
//
// The caller owns the bytes. It hands the parser what arrived (Parse), in order, and the parser
// answers how many of them it took and why it stopped: the head is complete (head() is valid),
// the message is complete (the rest of the bytes, if any, are the next pipelined request), it
// needs more, or the request is refused (error_status(): 400 malformed or ambiguous framing,
// 413 body too large, 431 head too large or too many headers). The head's fields are views into
// the caller's bytes: every byte of a head must stay where it was until the head is complete
// (a head split over reads is a head the caller keeps contiguous, or parses again from its start
// after a Reset()). Body bytes are taken as they come and left where they are: a forwarder sends
// the raw bytes the parser took (chunked framing included); a server that wants the payload
// itself (chunk framing removed) sets a body sink, which the payload bytes are appended to.
//
// Refused, as request smuggling defences (RFC 9112 §6.3): Content-Length with Transfer-Encoding,
// two Content-Length headers, a Transfer-Encoding whose last coding is not chunked, chunk data
// not followed by CRLF, obsolete line folding, bare LF line ends (the last two by the adapter's
// own check of the head), and anything else llhttp's strict mode (LLHTTP_STRICT_MODE) refuses.
// A chunked body's trailer lines are forwarded with the body, not added to the head.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dais::frontends::http {

struct Http1Limits {
  size_t max_head_bytes = 64 * 1024;            // request line and headers (431 beyond)
  size_t max_headers = 64;                      // header lines (431 beyond)
  uint64_t max_body_bytes = uint64_t{1} << 32;  // declared or received (413 beyond)
  uint64_t max_body_chunks = UINT64_MAX;        // a chunked body's chunks (413 beyond)
};

struct Http1Header {
  std::string_view name, value;
};

// (A field added here is also reset in Http1RequestParser::Reset, which does not rebuild the head.)
struct Http1RequestHead {
  std::string_view method, target;
  int version_major = 1, version_minor = 1;
  std::array<Http1Header, 64> headers = {};  // the first `header_count` are set
  size_t header_count = 0;
  size_t head_bytes = 0;         // request line and headers on the wire, CRLFs included
  int64_t content_length = -1;   // -1: none declared (chunked, or no body)
  bool chunked = false;          // Transfer-Encoding: chunked
  bool keep_alive = true;        // HTTP/1.1 without "Connection: close" (or 1.0 with keep-alive)
  bool expect_continue = false;  // Expect: 100-continue: answer 100 before reading the body
  // The value of the first header named `name` (ASCII case-insensitive); empty when absent.
  std::string_view Find(std::string_view name) const;
};

class Http1RequestParser {
 public:
  enum class Stop {
    kNeedMore,         // every byte given was taken; the message goes on
    kHeadComplete,     // the head ended after `consumed` bytes; head() is valid
    kMessageComplete,  // the message ended after `consumed` bytes; Reset() for the next one
    kError,            // refused: error_status() / error()
  };
  struct Result {
    Stop stop = Stop::kNeedMore;
    size_t consumed = 0;  // bytes of `data` taken (the body bytes among them are raw)
  };

  explicit Http1RequestParser(Http1Limits limits = {});
  ~Http1RequestParser();
  Http1RequestParser(const Http1RequestParser&) = delete;
  Http1RequestParser& operator=(const Http1RequestParser&) = delete;

  // Parses the next bytes of the connection. After kHeadComplete, call again with the bytes
  // after `consumed` to go through the body -- also when there are none yet: a request without
  // a body completes on that call, with nothing consumed. After kMessageComplete, Reset() before
  // the next request; after kError the connection must be closed (the framing is lost).
  Result Parse(std::string_view data);
  // As Parse, for a caller whose bytes may be written to during the call (a server's own read
  // buffer): bytes 0x80-0xFF in the request line (a raw UTF-8 path, as curl sends one), which
  // llhttp's strict mode refuses, are taken as nginx and Beast take them. They are hidden from
  // llhttp and put back before this returns, so the head's fields show them.
  Result ParseInPlace(char* data, size_t size);
  // Ready for the next request on the same connection (after kMessageComplete), or to parse a
  // head again from its first byte (after kNeedMore in the head).
  void Reset();
  // Where the payload bytes of the body go from now on (appended; chunk framing removed), or
  // null (the default): nowhere.
  void set_body_sink(std::string* sink) { body_sink_ = sink; }

  const Http1RequestHead& head() const { return head_; }
  bool in_body() const { return state_ == State::kBody; }
  uint64_t body_bytes() const { return body_bytes_; }  // payload bytes (without chunk framing)
  uint64_t chunks() const { return chunks_; }          // chunk headers of a chunked body so far
  int error_status() const { return error_status_; }   // 400, 413 or 431
  const std::string& error() const { return error_; }

 private:
  enum class State { kHead, kBody, kDone, kError };
  struct Callbacks;

  Result Fail(int status, std::string message, size_t consumed);
  static void Extend(std::string_view* field, const char* at, size_t length);

  Http1Limits limits_;
  struct Llhttp;
  std::unique_ptr<Llhttp> llhttp_;
  Http1RequestHead head_;
  State state_ = State::kHead;
  bool in_value_ = false;  // the last header callback was a value (a new field starts a header)
  bool too_many_headers_ = false;
  bool request_line_seen_ = false;     // ParseInPlace: its end has been given
  bool request_line_started_ = false;  // ParseInPlace: a byte other than CR / LF has been given
  uint64_t body_bytes_ = 0;
  uint64_t chunks_ = 0;
  uint64_t framing_bytes_ = 0;  // a body's bytes that are not payload (chunk framing, trailers)
  std::string* body_sink_ = nullptr;
  size_t trailer_bytes_ = 0;
  const char* head_start_ = nullptr;  // the current head's first byte (the caller's buffer)
  int error_status_ = 0;
  std::string error_;
};

}  // namespace dais::frontends::http
