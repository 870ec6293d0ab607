#include "perf/options.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

namespace dais::perf {
namespace {

constexpr size_t kMaxLevels = 1000;

bool ParseNumber(std::string_view s, double* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

// Shared by both range kinds; `integral` requires whole numbers.
StatusOr<std::vector<double>> ParseRange(std::string_view flag, std::string_view text,
                                         bool integral) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(
        fmt::format("{} '{}': {} (expected start[:end[:step]], step N to add "
                    "or xN to multiply, e.g. 1:64:x2)",
                    flag, text, why));
  };
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    size_t colon = text.find(':', pos);
    parts.push_back(text.substr(pos, colon == std::string_view::npos ? colon : colon - pos));
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  if (parts.size() > 3) return bad("too many ':'");
  double start = 0, end = 0, step = 1;
  bool multiply = false;
  if (!ParseNumber(parts[0], &start)) return bad("start is not a number");
  end = start;
  if (parts.size() >= 2 && !ParseNumber(parts[1], &end)) return bad("end is not a number");
  if (parts.size() == 3) {
    std::string_view s = parts[2];
    if (!s.empty() && (s[0] == 'x' || s[0] == 'X')) {
      multiply = true;
      s.remove_prefix(1);
    }
    if (!ParseNumber(s, &step)) return bad("step is not a number");
  }
  if (integral && (start != std::floor(start) || end != std::floor(end) ||
                   (!multiply && step != std::floor(step)))) {
    return bad("values must be whole numbers");
  }
  if (start <= 0) return bad("start must be positive");
  if (end < start) return bad("end is smaller than start");
  if (multiply ? step <= 1 : step <= 0) {
    return bad(multiply ? "a multiplying step must be greater than 1" : "step must be positive");
  }
  std::vector<double> levels;
  // Tolerate rounding in fractional steps ("0.1:0.3:0.1" reaches 0.3).
  const double limit = end * (1 + 1e-9);
  for (double v = start; v <= limit;) {
    if (levels.size() == kMaxLevels) return bad(fmt::format("more than {} levels", kMaxLevels));
    levels.push_back(v);
    double next = multiply ? v * step : v + step;
    if (integral) next = multiply ? std::ceil(next) : next;  // x1.5 still makes progress
    if (next <= v) return bad("step does not grow");
    v = next;
  }
  return levels;
}

}  // namespace

StatusOr<std::vector<int64_t>> ParseConcurrencyRange(std::string_view flag, std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<double> levels, ParseRange(flag, text, true));
  std::vector<int64_t> out;
  out.reserve(levels.size());
  for (double v : levels) out.push_back(static_cast<int64_t>(v));
  return out;
}

StatusOr<std::vector<double>> ParseRateRange(std::string_view flag, std::string_view text) {
  return ParseRange(flag, text, false);
}

StatusOr<HostPort> ParseUrl(std::string_view url, int default_port) {
  bool tls = false;
  for (std::string_view prefix : {"http://", "grpc://", "https://", "grpcs://"}) {
    if (url.substr(0, prefix.size()) == prefix) {
      tls = prefix.size() == 8;
      url.remove_prefix(prefix.size());
    }
  }
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  if (url.empty()) return InvalidArgument("-u/--url: empty address");
  HostPort hp;
  hp.tls = tls;
  std::string_view port;
  if (url[0] == '[') {  // [v6]:port
    size_t close = url.find(']');
    if (close == std::string_view::npos) return InvalidArgument("-u/--url: unclosed '['");
    hp.host = std::string(url.substr(1, close - 1));
    std::string_view rest = url.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return InvalidArgument(fmt::format("-u/--url '{}': bad port", url));
      port = rest.substr(1);
    }
  } else {
    size_t colon = url.rfind(':');
    if (colon != std::string_view::npos) {
      hp.host = std::string(url.substr(0, colon));
      port = url.substr(colon + 1);
    } else {
      hp.host = std::string(url);
    }
  }
  if (hp.host.empty()) return InvalidArgument(fmt::format("-u/--url '{}': no host", url));
  if (port.empty()) {
    hp.port = std::to_string(default_port);
  } else {
    int p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p <= 0 || p > 65535) {
      return InvalidArgument(fmt::format("-u/--url '{}': port must be 1..65535", url));
    }
    hp.port = std::string(port);
  }
  return hp;
}

Status ValidateOptions(const PerfOptions& o) {
  if (o.model_name.empty()) return InvalidArgument("-m/--model-name is required");
  if (o.protocol != "http" && o.protocol != "grpc") {
    return InvalidArgument("-i/--protocol must be http or grpc");
  }
  if (o.http_binary && o.protocol != "http") {
    return InvalidArgument("--http-binary applies to -i http only");
  }
  if (o.grpc_stub && o.protocol != "grpc") {
    return InvalidArgument("--grpc-stub applies to -i grpc only");
  }
  if (o.grpc_connections < 0) return InvalidArgument("--grpc-connections must be 0 or more");
  if (o.grpc_connections > 0 && (o.protocol != "grpc" || o.grpc_stub)) {
    return InvalidArgument(
        "--grpc-connections applies to -i grpc with dais perf's own client (not --grpc-stub)");
  }
  if (!o.concurrency_range.empty() && !o.request_rate_range.empty()) {
    return InvalidArgument("--concurrency-range and --request-rate-range exclude each other");
  }
  if (o.request_distribution != "constant" && o.request_distribution != "poisson") {
    return InvalidArgument("--request-distribution must be constant or poisson");
  }
  if (o.batch_size < 1) return InvalidArgument("-b/--batch-size must be at least 1");
  if (o.max_threads < 1) return InvalidArgument("--max-threads must be at least 1");
  if (o.string_length < 0) return InvalidArgument("--string-length must not be negative");
  if (o.warmup_secs < 0) return InvalidArgument("--warmup-secs must not be negative");
  if (o.measurement_interval_ms < 10) {
    return InvalidArgument("--measurement-interval-ms must be at least 10");
  }
  if (o.stability_percentage <= 0) {
    return InvalidArgument("--stability-percentage must be positive");
  }
  if (o.max_trials < 1) return InvalidArgument("--max-trials must be at least 1");
  if (!o.concurrency_range.empty()) {
    RETURN_IF_ERROR(ParseConcurrencyRange("--concurrency-range", o.concurrency_range).status());
  }
  if (!o.request_rate_range.empty()) {
    RETURN_IF_ERROR(ParseRateRange("--request-rate-range", o.request_rate_range).status());
  }
  return OkStatus();
}

}  // namespace dais::perf
