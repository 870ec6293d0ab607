#include "redis/resp.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

namespace dais::redis {
namespace {

void AppendHeader(char type, size_t n, std::string* out) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), n);
  (void)ec;  // 24 bytes always fit a size_t
  out->push_back(type);
  out->append(digits, end);
  out->append("\r\n");
}

// Strict decimal int64: optional '-', at least one digit, nothing else, no overflow.
bool ParseInt(std::string_view s, int64_t* v) {
  if (s.empty() || s[0] == '+') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

void Quote(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out->append("\\x");
      out->push_back(kHex[static_cast<unsigned char>(c) >> 4]);
      out->push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

void ToString(const Reply& r, std::string* out) {
  switch (r.type) {
    case Reply::Type::kStatus:
      out->append(r.str);
      return;
    case Reply::Type::kError:
      out->append("(error) ").append(r.str);
      return;
    case Reply::Type::kInteger:
      out->append("(integer) ").append(std::to_string(r.integer));
      return;
    case Reply::Type::kBulk:
      Quote(r.str, out);
      return;
    case Reply::Type::kNil:
      out->append("(nil)");
      return;
    case Reply::Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < r.elements.size(); ++i) {
        if (i) out->append(", ");
        ToString(r.elements[i], out);
      }
      out->push_back(']');
      return;
  }
}

}  // namespace

std::string ReplyToString(const Reply& reply) {
  std::string out;
  ToString(reply, &out);
  return out;
}

void AppendCommand(const Command& args, std::string* out) {
  AppendArrayHeader(args.size(), out);
  for (const std::string& a : args) AppendBulk(a, out);
}

void AppendArrayHeader(size_t n, std::string* out) { AppendHeader('*', n, out); }

void AppendBulk(std::string_view arg, std::string* out) {
  AppendHeader('$', arg.size(), out);
  out->append(arg);
  out->append("\r\n");
}

std::string EncodeCommand(const Command& args) {
  std::string out;
  size_t n = 16;
  for (const std::string& a : args) n += a.size() + 16;
  out.reserve(n);
  AppendCommand(args, &out);
  return out;
}

RespParser::Step RespParser::Fail(std::string message) {
  error_ = InvalidArgument("RESP protocol error: " + std::move(message));
  return Step::kError;
}

// Parses one item at pos_: a complete scalar (kItem, *item set, input consumed), the header of a
// non-empty array (kArrayStarted, a frame pushed, header consumed), or kNeedMore (nothing
// consumed).
RespParser::Step RespParser::ParseOne(Reply* item) {
  const char* begin = buf_.data() + pos_;
  const size_t avail = buf_.size() - pos_;
  if (avail == 0) return Step::kNeedMore;
  const void* cr = std::memchr(begin, '\r', std::min(avail, kMaxLine + 1));
  if (cr == nullptr) {
    if (avail > kMaxLine) return Fail("line longer than 64 KiB");
    return Step::kNeedMore;
  }
  const size_t line_len = static_cast<const char*>(cr) - begin;  // includes the type byte
  if (line_len + 1 >= avail) return Step::kNeedMore;             // '\n' not here yet
  if (begin[line_len + 1] != '\n') return Fail("CR not followed by LF");
  const char type = begin[0];
  const std::string_view body(begin + 1, line_len == 0 ? 0 : line_len - 1);
  if (line_len == 0) return Fail("empty line");
  const size_t header = line_len + 2;

  switch (type) {
    case '+':
    case '-':
      *item = type == '+' ? Reply::Status(std::string(body)) : Reply::Error(std::string(body));
      pos_ += header;
      return Step::kItem;
    case ':': {
      int64_t v;
      if (!ParseInt(body, &v)) return Fail("bad integer");
      *item = Reply::Integer(v);
      pos_ += header;
      return Step::kItem;
    }
    case '$': {
      int64_t len;
      if (!ParseInt(body, &len)) return Fail("bad bulk length");
      if (len == -1) {
        *item = Reply::Nil();
        pos_ += header;
        return Step::kItem;
      }
      if (len < 0) return Fail("negative bulk length");
      if (len > kMaxBulk) return Fail("bulk string longer than 512 MiB");
      const size_t need = header + static_cast<size_t>(len) + 2;
      if (avail < need) return Step::kNeedMore;
      if (begin[need - 2] != '\r' || begin[need - 1] != '\n') return Fail("bulk not ended by CRLF");
      *item = Reply::Bulk(std::string(begin + header, static_cast<size_t>(len)));
      pos_ += need;
      return Step::kItem;
    }
    case '*': {
      int64_t n;
      if (!ParseInt(body, &n)) return Fail("bad array length");
      if (n == -1) {
        *item = Reply::Nil();
        pos_ += header;
        return Step::kItem;
      }
      if (n < 0) return Fail("negative array length");
      if (n > kMaxArray) return Fail("array longer than 2^24 elements");
      if (static_cast<int>(stack_.size()) >= kMaxDepth) return Fail("arrays nested too deep");
      pos_ += header;
      if (n == 0) {
        *item = Reply::Array({});
        return Step::kItem;
      }
      Frame f{Reply::Array({}), n};
      f.array.elements.reserve(static_cast<size_t>(std::min<int64_t>(n, 1024)));
      stack_.push_back(std::move(f));
      return Step::kArrayStarted;
    }
    default:
      return Fail(fmt::format("unknown type byte 0x{:02x}", static_cast<unsigned char>(type)));
  }
}

Status RespParser::Feed(std::string_view bytes, std::vector<Reply>* out) {
  if (!error_.ok()) return error_;
  // Drop consumed input before it dominates the buffer (amortised O(1) per byte).
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= 4096)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
  for (;;) {
    Reply item;
    switch (ParseOne(&item)) {
      case Step::kNeedMore:
        return OkStatus();
      case Step::kError:
        return error_;
      case Step::kArrayStarted:
        continue;
      case Step::kItem:
        break;
    }
    // Attach the item to the innermost open array; close every array it completes. The item is
    // a complete top-level reply when no array is left open.
    bool top_level = true;
    while (!stack_.empty()) {
      Frame& top = stack_.back();
      top.array.elements.push_back(std::move(item));
      if (--top.remaining > 0) {
        top_level = false;
        break;
      }
      item = std::move(top.array);
      stack_.pop_back();
    }
    if (top_level) out->push_back(std::move(item));
  }
}

}  // namespace dais::redis
