// libFuzzer target for the RESP2 reply parser (redis/resp.h), the bytes a Redis server (or
// anything posing as one) sends us. Checks, besides crashes and sanitizer reports:
//  - feeding the input whole or in chunks gives the same replies and the same verdict;
//  - every parsed reply re-encodes to RESP that parses back to the same reply.
// Input: byte 0 picks the chunk size (1..16); the rest is the stream.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "redis/resp.h"

namespace {

using dais::redis::Reply;
using dais::redis::RespParser;

void Check(bool ok) {
  if (!ok) std::abort();
}

void Encode(const Reply& r, std::string* out) {
  switch (r.type) {
    case Reply::Type::kStatus:
      *out += "+" + r.str + "\r\n";
      return;
    case Reply::Type::kError:
      *out += "-" + r.str + "\r\n";
      return;
    case Reply::Type::kInteger:
      *out += ":" + std::to_string(r.integer) + "\r\n";
      return;
    case Reply::Type::kBulk:
      *out += "$" + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
      return;
    case Reply::Type::kNil:
      *out += "$-1\r\n";
      return;
    case Reply::Type::kArray:
      *out += "*" + std::to_string(r.elements.size()) + "\r\n";
      for (const Reply& e : r.elements) Encode(e, out);
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  RespParser whole;
  std::vector<Reply> a;
  const bool whole_ok = whole.Feed(input, &a).ok();

  RespParser chunked;
  std::vector<Reply> b;
  bool chunked_ok = true;
  for (size_t i = 0; i < input.size() && chunked_ok; i += chunk) {
    chunked_ok = chunked.Feed(input.substr(i, chunk), &b).ok();
  }
  Check(whole_ok == chunked_ok);
  Check(a == b);
  if (whole_ok) Check(whole.buffered() == chunked.buffered());

  for (const Reply& r : a) {
    std::string encoded;
    Encode(r, &encoded);
    RespParser again;
    std::vector<Reply> c;
    Check(again.Feed(encoded, &c).ok());
    Check(c.size() == 1 && c[0] == r && again.buffered() == 0);
  }
  return 0;
}
