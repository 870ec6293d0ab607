// RESP2 (REdis Serialization Protocol) codec: command encoding and an incremental reply parser
// (https://redis.io/docs/reference/protocol-spec/).
//
// Thread-safety: the free functions are thread-safe; a RespParser is not (one per connection).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::redis {

// One reply from the server. A nil bulk string ($-1) and a nil array (*-1) are both kNil.
struct Reply {
  enum class Type { kStatus, kError, kInteger, kBulk, kNil, kArray };
  Type type = Type::kNil;
  std::string str;              // kStatus, kError, kBulk
  int64_t integer = 0;          // kInteger
  std::vector<Reply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  bool is_nil() const { return type == Type::kNil; }

  static Reply Status(std::string s) { return Reply{Type::kStatus, std::move(s), 0, {}}; }
  static Reply Error(std::string s) { return Reply{Type::kError, std::move(s), 0, {}}; }
  static Reply Integer(int64_t v) { return Reply{Type::kInteger, {}, v, {}}; }
  static Reply Bulk(std::string s) { return Reply{Type::kBulk, std::move(s), 0, {}}; }
  static Reply Nil() { return Reply{}; }
  static Reply Array(std::vector<Reply> e) { return Reply{Type::kArray, {}, 0, std::move(e)}; }

  bool operator==(const Reply& o) const = default;
};

// For test output and logs: `"abc"`, `(error) ERR x`, `(integer) 3`, `(nil)`, `[1, "a"]`.
std::string ReplyToString(const Reply& reply);

// A command and its arguments, binary-safe: {"SET", "k", "v"}.
using Command = std::vector<std::string>;

// The RESP array of bulk strings for `args` (the only form Redis accepts from clients besides
// inline commands).
std::string EncodeCommand(const Command& args);
// Same, appended to *out (to build one pipelined write).
void AppendCommand(const Command& args, std::string* out);
// The pieces, for building a command without a Command vector: "*<n>\r\n", then n bulk strings
// "$<len>\r\n<arg>\r\n".
void AppendArrayHeader(size_t n, std::string* out);
void AppendBulk(std::string_view arg, std::string* out);

// Incremental parser: feed bytes as they arrive, in chunks of any size (down to one byte).
// Memory: buffers at most one incomplete reply (a bulk string is held until all of it arrived).
class RespParser {
 public:
  static constexpr int kMaxDepth = 16;                      // nested arrays
  static constexpr int64_t kMaxBulk = 512LL * 1024 * 1024;  // bytes in one bulk string
  static constexpr int64_t kMaxArray = int64_t{1} << 24;    // elements in one array
  static constexpr size_t kMaxLine = 64 * 1024;  // a +status, -error, :int or header line

  // Appends every reply completed by `bytes` to *out, in order, and keeps the partial rest.
  // InvalidArgument on a protocol violation (unknown type byte, bad number, missing CRLF, a limit
  // exceeded); the error is sticky (every later Feed returns it) and the connection must be
  // dropped. Replies completed before the violation are still appended.
  Status Feed(std::string_view bytes, std::vector<Reply>* out);

  // Bytes buffered but not yet part of a complete reply.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  struct Frame {
    Reply array;
    int64_t remaining;
  };
  enum class Step { kNeedMore, kItem, kArrayStarted, kError };

  Step ParseOne(Reply* item);
  Step Fail(std::string message);

  std::string buf_;
  size_t pos_ = 0;
  std::vector<Frame> stack_;
  Status error_;
};

}  // namespace dais::redis
