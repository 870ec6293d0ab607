// libFuzzer target for the HTTP/1.1 request framing of the server and the gateway
// (frontends/http/http1_parser.h). The input is parsed in one piece and in pieces of 1-8 bytes
// (the first byte picks the size), with Parse and with ParseInPlace (the server's way, on a
// copy it may write to): each pair must see the same heads, bodies (the payload the sink got),
// message ends and refusal, take no byte beyond what it was given, and point every head field
// into the input; ParseInPlace must leave every byte as it was. Anything else traps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/http/http1_parser.h"

namespace {

using dais::frontends::http::Http1RequestParser;
using Stop = Http1RequestParser::Stop;

bool Inside(std::string_view field, std::string_view in) {
  return field.empty() ||
         (field.data() >= in.data() && field.data() + field.size() <= in.data() + in.size());
}

std::vector<std::string> Run(std::string& bytes, size_t step, bool in_place) {
  const std::string_view in = bytes;
  dais::frontends::http::Http1Limits limits;
  limits.max_head_bytes = 512;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  limits.max_body_chunks = 32;
  Http1RequestParser p(limits);
  std::vector<std::string> events;
  std::string body;
  size_t off = 0;
  while (events.size() < 256) {
    const size_t given = std::min(step, in.size() - off);
    if (given == 0 && !p.in_body()) break;
    const auto r =
        in_place ? p.ParseInPlace(bytes.data() + off, given) : p.Parse(in.substr(off, given));
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
      body.clear();
      p.set_body_sink(&body);
      continue;
    }
    if (body.size() != p.body_bytes()) __builtin_trap();
    events.push_back("end at " + std::to_string(off) + " body " + body);  // kMessageComplete
    p.Reset();
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t step = size == 0 ? 1 : 1 + data[0] % 8;
  for (bool in_place : {false, true}) {
    std::string whole = in, pieces = in;
    if (Run(whole, in.size() + 1, in_place) != Run(pieces, step, in_place)) __builtin_trap();
    if (whole != in || pieces != in) __builtin_trap();
  }
  return 0;
}
