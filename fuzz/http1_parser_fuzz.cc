// libFuzzer target for the gateway's HTTP/1.1 request framing (gateway/http1_parser.h). The
// input is parsed twice, in one piece and in pieces of 1-8 bytes (the first byte picks the
// size): both must see the same heads, message ends and refusal, take no byte beyond what they
// were given, and point every head field into the input. Anything else traps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http1_parser.h"

namespace {

using dais::gateway::Http1RequestParser;
using Stop = Http1RequestParser::Stop;

bool Inside(std::string_view field, std::string_view in) {
  return field.empty() ||
         (field.data() >= in.data() && field.data() + field.size() <= in.data() + in.size());
}

std::vector<std::string> Run(std::string_view in, size_t step) {
  dais::gateway::Http1Limits limits;
  limits.max_head_bytes = 512;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  Http1RequestParser p(limits);
  std::vector<std::string> events;
  size_t off = 0;
  while (events.size() < 256) {
    const size_t given = std::min(step, in.size() - off);
    if (given == 0 && !p.in_body()) break;
    const auto r = p.Parse(in.substr(off, given));
    if (r.consumed > given) __builtin_trap();
    off += r.consumed;
    if (r.stop == Stop::kNeedMore) {
      if (r.consumed != given) __builtin_trap();
      if (given == 0) break;  // the input ends inside a body
      continue;
    }
    if (r.stop == Stop::kError) {
      const int s = p.error_status();
      if (s != 400 && s != 413 && s != 431) __builtin_trap();
      if (p.Parse(in.substr(off)).stop != Stop::kError) __builtin_trap();
      events.push_back("refused");
      break;
    }
    if (r.stop == Stop::kHeadComplete) {
      const auto& h = p.head();
      if (!Inside(h.method, in) || !Inside(h.target, in)) __builtin_trap();
      if (h.header_count > 16) __builtin_trap();
      for (size_t i = 0; i < h.header_count; ++i) {
        if (!Inside(h.headers[i].name, in) || !Inside(h.headers[i].value, in)) __builtin_trap();
      }
      if (h.chunked && h.content_length >= 0) __builtin_trap();  // CL with TE is refused
      events.push_back("head " + std::string(h.method) + " " + std::string(h.target) + " " +
                       std::to_string(h.content_length) + (h.chunked ? " chunked" : ""));
      continue;
    }
    events.push_back("end at " + std::to_string(off));  // kMessageComplete
    p.Reset();
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t step = size == 0 ? 1 : 1 + data[0] % 8;
  if (Run(in, in.size() + 1) != Run(in, step)) __builtin_trap();
  return 0;
}
