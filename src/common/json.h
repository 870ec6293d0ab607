// Parsing untrusted JSON with a nesting limit. Every JSON body dais reads from the network (the
// inference, repository and Feast endpoints) and every JSON model file goes through ParseJson:
// it parses iteratively (no recursion, whatever the input) and stops at the first value nested
// deeper than `max_depth`, so a 40 MB body of '[' costs 100 bytes of parsing and no allocation
// beyond them (issue 11: such a body took 11.7 s and 0.9 GB before, and a deeper one sent to a
// repository endpoint overflowed the stack). Triton refuses JSON nested deeper than 100 levels;
// so does dais by default.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "dais/status.h"

namespace dais::json {

inline constexpr int kDefaultMaxDepth = 100;

namespace internal {

enum class NumberKind { kInt64, kUint64, kDouble, kOutOfRange };
union Number {
  int64_t i;
  uint64_t u;
  double d;
};
// A JSON number's text (or NaN / Infinity / -Infinity) as the nearest value, correctly rounded:
// an integer when it is one that fits 64 bits, else a double; kOutOfRange beyond the largest
// double (a number below the smallest becomes zero or a subnormal, as strtod reads it).
NumberKind ReadNumber(std::string_view text, Number* out);

// Forwards SAX events to a Document and refuses to open a container deeper than the limit.
template <typename Handler>
class DepthLimit {
 public:
  DepthLimit(Handler& h, int max_depth) : h_(h), max_depth_(max_depth) {}
  bool Null() { return h_.Null(); }
  bool Bool(bool b) { return h_.Bool(b); }
  bool Int(int i) { return h_.Int(i); }
  bool Uint(unsigned i) { return h_.Uint(i); }
  bool Int64(int64_t i) { return h_.Int64(i); }
  bool Uint64(uint64_t i) { return h_.Uint64(i); }
  bool Double(double d) { return h_.Double(d); }
  // Numbers come as text when ParseJson asked for full precision (below): converted here.
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    switch (ReadNumber(std::string_view(s, n), &number_)) {
      case NumberKind::kInt64:
        return h_.Int64(number_.i);
      case NumberKind::kUint64:
        return h_.Uint64(number_.u);
      case NumberKind::kDouble:
        return h_.Double(number_.d);
      case NumberKind::kOutOfRange:
        break;
    }
    out_of_range_ = true;
    return false;
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return h_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return h_.Key(s, n, copy); }
  bool StartObject() { return Open() && h_.StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return h_.EndObject(n);
  }
  bool StartArray() { return Open() && h_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth_;
    return h_.EndArray(n);
  }
  bool too_deep() const { return too_deep_; }
  bool out_of_range() const { return out_of_range_; }

 private:
  bool Open() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  Handler& h_;
  const int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  bool out_of_range_ = false;
  Number number_;
};

}  // namespace internal

// Tracks the nesting depth of a JSON text fed in pieces as it arrives, outside strings, without
// parsing or storing it: the HTTP server refuses a body nested too deep after its first bytes
// instead of reading all of it (ParseJson stays the authority on what is valid JSON).
class DepthScanner {
 public:
  explicit DepthScanner(int max_depth = kDefaultMaxDepth) : max_depth_(max_depth) {}
  // False once the nesting went deeper than max_depth (then offset() is where).
  bool Feed(std::string_view bytes) {
    for (char c : bytes) {
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '[' || c == '{') {
        if (++depth_ > max_depth_) return false;
      } else if ((c == ']' || c == '}') && depth_ > 0) {
        --depth_;
      }
      ++offset_;
    }
    return true;
  }
  size_t offset() const { return offset_; }
  int max_depth() const { return max_depth_; }

 private:
  const int max_depth_;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  size_t offset_ = 0;
};

// Parses `text` into `*doc` with rapidjson's `kFlags` (kParseIterativeFlag is always added).
// InvalidArgument on malformed JSON ("malformed JSON at offset N: <reason>"), on a NUL byte
// (rapidjson would stop there silently), and on nesting deeper than `max_depth` ("JSON nested
// deeper than N levels at offset M"). `*doc` is unspecified after a failure.
template <unsigned kFlags = 0>
Status ParseJson(std::string_view text, rapidjson::Document* doc,
                 int max_depth = kDefaultMaxDepth) {
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument("malformed JSON at offset " + std::to_string(nul) + ": NUL byte");
  }
  // rapidjson 1.1's full-precision conversion reads a zero with a large exponent ("0e50") as
  // garbage (1.3e300 for "0e+300"; found by fuzz/infer_request_fuzz): full precision is asked of
  // the reader as numbers as text, converted by internal::ReadNumber instead.
  constexpr bool kFull = (kFlags & rapidjson::kParseFullPrecisionFlag) != 0;
  constexpr unsigned kReaderFlags = (kFull ? (kFlags & ~rapidjson::kParseFullPrecisionFlag) |
                                                 rapidjson::kParseNumbersAsStringsFlag
                                           : kFlags) |
                                    rapidjson::kParseIterativeFlag;
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(text.data(), text.size());
  bool too_deep = false, out_of_range = false;
  auto generate = [&](rapidjson::Document& d) {
    internal::DepthLimit<rapidjson::Document> limited(d, max_depth);
    bool ok = !reader.Parse<kReaderFlags>(ms, limited).IsError();
    too_deep = limited.too_deep();
    out_of_range = limited.out_of_range();
    return ok;
  };
  doc->Populate(generate);
  if (too_deep) {
    return InvalidArgument("JSON nested deeper than " + std::to_string(max_depth) +
                           " levels at offset " + std::to_string(reader.GetErrorOffset()));
  }
  if (out_of_range) {
    return InvalidArgument("malformed JSON at offset " + std::to_string(reader.GetErrorOffset()) +
                           ": a number beyond the range of a double (+-1.8e308)");
  }
  if (reader.HasParseError()) {
    return InvalidArgument("malformed JSON at offset " + std::to_string(reader.GetErrorOffset()) +
                           ": " + rapidjson::GetParseError_En(reader.GetParseErrorCode()));
  }
  return OkStatus();
}

}  // namespace dais::json
