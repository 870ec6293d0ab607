// HTTP/1.1 answer framing for the gateway's connections to the nodes (upstream.cc), on llhttp
// like the request side (http1_parser.h): the status, the headers (names lower-cased) and the
// body, de-chunked, collected as the bytes arrive in whatever pieces. An interim 1xx answer is
// a complete answer of its own: the caller resets and parses on (the real one follows).
//
// A body over the limit, declared or received (Content-Length, chunked or delimited by the
// close), stops the parse with too_large() set: the answer is refused, not cut. A head over
// 64 KiB or 100 lines is refused as malformed. HEAD, 1xx, 204 and 304 answers have no body.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dais::gateway {

class Http1ResponseParser {
 public:
  enum class Stop {
    kNeedMore,  // every byte given was taken; the answer goes on
    kComplete,  // the answer ended after `consumed` bytes (the rest is not this answer's)
    kError,     // malformed or too large: error(); the connection must be closed
  };
  struct Result {
    Stop stop = Stop::kNeedMore;
    size_t consumed = 0;
  };

  explicit Http1ResponseParser(uint64_t max_body_bytes);
  ~Http1ResponseParser();
  Http1ResponseParser(const Http1ResponseParser&) = delete;
  Http1ResponseParser& operator=(const Http1ResponseParser&) = delete;

  // Ready for the next answer on the connection; `to_head`: it answers a HEAD request (no body
  // whatever its Content-Length says). Keeps the buffers' capacity.
  void Reset(bool to_head = false);
  Result Parse(std::string_view data);
  // The node closed the connection: completes an answer delimited by the close (kComplete),
  // else kError (cut short) -- or kNeedMore when no byte of an answer had come.
  Stop Finish();

  bool started() const { return started_; }  // a byte of this answer was taken
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  bool too_large() const { return too_large_; }
  const std::string& error() const { return error_; }
  std::vector<std::pair<std::string, std::string>>& headers() { return headers_; }
  std::string& body() { return body_; }

 private:
  struct Callbacks;
  struct Llhttp;
  static constexpr size_t kMaxHeadBytes = 64 * 1024;
  static constexpr size_t kMaxHeaders = 100;
  std::unique_ptr<Llhttp> llhttp_;
  uint64_t max_body_bytes_;
  bool to_head_ = false;
  bool started_ = false;
  bool in_value_ = false;
  bool in_body_ = false;  // the head ended: header callbacks now carry trailers
  bool too_large_ = false;
  bool keep_alive_ = false;
  int status_ = 0;
  size_t head_bytes_ = 0;  // header (and trailer) bytes so far
  std::vector<std::pair<std::string, std::string>> headers_;
  std::string body_;
  std::string error_;
};

}  // namespace dais::gateway
