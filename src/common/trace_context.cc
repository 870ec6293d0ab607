#include "common/trace_context.h"

#include <algorithm>
#include <random>

#include "dais/clock.h"

namespace dais {
namespace {

bool LowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

std::string RandomHex(size_t digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(digits, '0');
  do {
    for (size_t i = 0; i < digits; i += 16) {
      uint64_t v = rng();
      for (size_t j = i; j < std::min(digits, i + 16); ++j, v >>= 4) out[j] = kHex[v & 15];
    }
  } while (AllZero(out));
  return out;
}

}  // namespace

std::string TraceContext::Header(const std::string& span_id) const {
  std::string out(3 + trace_id.size() + 1 + span_id.size() + 3, '\0');  // one allocation
  out.resize(HeaderTo(span_id, out.data(), out.size()));
  return out;
}

size_t TraceContext::HeaderTo(std::string_view span_id, char* out, size_t size) const {
  static constexpr char kHex[] = "0123456789abcdef";
  const size_t n = 3 + trace_id.size() + 1 + span_id.size() + 3;
  if (n > size) return 0;
  char* p = out;
  auto put = [&p](std::string_view s) { p = std::copy(s.begin(), s.end(), p); };
  put("00-");
  put(trace_id);
  put("-");
  put(span_id);
  put("-");
  *p++ = kHex[flags >> 4];
  *p++ = kHex[flags & 15];
  return n;
}

std::optional<TraceContext> ParseTraceparent(std::string_view h) {
  // version(2) - trace-id(32) - parent-id(16) - flags(2) = 55 characters.
  if (h.size() < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  const std::string_view version = h.substr(0, 2), trace = h.substr(3, 32),
                         parent = h.substr(36, 16), flags = h.substr(53, 2);
  if (!LowerHex(version) || version == "ff") return std::nullopt;
  if (version == "00" ? h.size() != 55 : (h.size() > 55 && h[55] != '-')) return std::nullopt;
  if (!LowerHex(trace) || !LowerHex(parent) || !LowerHex(flags)) return std::nullopt;
  if (AllZero(trace) || AllZero(parent)) return std::nullopt;
  auto nibble = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
  return TraceContext{std::string(trace), std::string(parent),
                      static_cast<uint8_t>(nibble(flags[0]) << 4 | nibble(flags[1]))};
}

std::string NewTraceId() { return RandomHex(32); }
std::string NewSpanId() { return RandomHex(16); }

ServerTrace BeginServerTrace(std::string_view traceparent, std::string_view request_id,
                             double sample_rate) {
  ServerTrace t;
  t.start_unix_ns = UnixNs();
  if (auto parent = ParseTraceparent(traceparent)) {
    t.trace = std::move(*parent);
  } else {
    t.trace.trace_id = NewTraceId();
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const bool sampled =
        sample_rate > 0 && static_cast<double>(rng() % 1000000) < sample_rate * 1e6;
    t.trace.flags = sampled ? 1 : 0;
  }
  t.span_id = NewSpanId();
  t.request_id = SaneRequestId(request_id);
  if (t.request_id.empty()) t.request_id = t.trace.trace_id;
  return t;
}

std::string SaneRequestId(std::string_view h) {
  if (h.empty() || h.size() > 128) return "";
  for (char c : h) {
    if (c <= ' ' || c > '~') return "";
  }
  return std::string(h);
}

}  // namespace dais
