#include "common/duration.h"

#include <cctype>
#include <charconv>

#include "fmt/format.h"

namespace dais {

StatusOr<int64_t> ParseDurationUs(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  double v;
  auto [p, ec] = std::from_chars(text.data(), text.data() + i, v);
  if (i == 0 || ec != std::errc() || p != text.data() + i || v < 0) {
    return InvalidArgument(
        fmt::format("\"{}\" is not a duration (e.g. 250ms, 30s, 10m, 1h, 7d)", text));
  }
  std::string_view unit = text.substr(i);
  double mult;
  if (unit.empty() || unit == "s") {
    mult = 1e6;
  } else if (unit == "ms") {
    mult = 1e3;
  } else if (unit == "us") {
    mult = 1;
  } else if (unit == "m") {
    mult = 60e6;
  } else if (unit == "h") {
    mult = 3600e6;
  } else if (unit == "d") {
    mult = 86400e6;
  } else {
    return InvalidArgument(fmt::format("\"{}\": unknown unit \"{}\" (ms, s, m, h, d)", text, unit));
  }
  double us = v * mult;
  if (us > 9e18) return InvalidArgument(fmt::format("\"{}\" is too long", text));
  return static_cast<int64_t>(us);
}

}  // namespace dais
