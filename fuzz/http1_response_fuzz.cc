// libFuzzer target for the gateway's framing of the nodes' answers (gateway/http1_response.h).
// The input is parsed as a connection's bytes twice, in one piece and in pieces of 1-8 bytes
// (the first byte picks the size), each answer followed by the next (as on a kept-alive
// connection), then the end of the connection: both must see the same answers (status,
// headers, body, keep-alive), the same refusal, never take more than given, and never hold a
// body over the limit. Anything else traps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http1_response.h"

namespace {

using dais::gateway::Http1ResponseParser;
using Stop = Http1ResponseParser::Stop;
constexpr uint64_t kLimit = 4096;

std::string Describe(Http1ResponseParser& p) {
  if (p.body().size() > kLimit) __builtin_trap();
  std::string out = std::to_string(p.status()) + (p.keep_alive() ? " keep" : " close");
  for (const auto& [k, v] : p.headers()) out += "|" + k + ":" + v;
  return out + "|" + p.body();
}

std::vector<std::string> Run(std::string_view in, size_t step, bool to_head) {
  Http1ResponseParser p(kLimit);
  p.Reset(to_head);
  std::vector<std::string> events;
  size_t off = 0;
  while (off < in.size() && events.size() < 64) {
    const size_t given = std::min(step, in.size() - off);
    const auto r = p.Parse(in.substr(off, given));
    if (r.consumed > given) __builtin_trap();
    off += r.consumed;
    if (r.stop == Stop::kNeedMore) {
      if (r.consumed != given) __builtin_trap();
      continue;
    }
    if (r.stop == Stop::kError) {
      events.push_back(p.too_large() ? "too large" : "malformed");
      return events;
    }
    events.push_back(Describe(p));
    p.Reset(to_head);
  }
  switch (p.Finish()) {  // the connection ends
    case Stop::kComplete:
      events.push_back("at close " + Describe(p));
      break;
    case Stop::kError:
      events.push_back(p.too_large() ? "too large" : "cut");
      break;
    case Stop::kNeedMore:
      break;
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 8;
  const bool to_head = (data[0] & 0x80) != 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (Run(in, in.size() + 1, to_head) != Run(in, step, to_head)) __builtin_trap();
  return 0;
}
