#include "common/json.h"

#include <locale.h>
#include <stdlib.h>

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace dais::json::internal {
namespace {

bool IsIntegerText(std::string_view text) {
  const size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  if (start == text.size()) return false;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

template <typename T>
bool ReadWhole(std::string_view text, T* value) {
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), last, *value);
  return ec == std::errc() && ptr == last;
}

}  // namespace

NumberKind ReadNumber(std::string_view text, Number* out) {
  if (IsIntegerText(text)) {
    if (text[0] == '-' ? ReadWhole(text, &out->i) : ReadWhole(text, &out->u)) {
      return text[0] == '-' ? NumberKind::kInt64 : NumberKind::kUint64;
    }
    // Beyond 64 bits: the nearest double, below.
  }
  if (ReadWhole(text, &out->d)) return NumberKind::kDouble;
  // std::from_chars says out of range both beyond the largest double and below the smallest;
  // strtod tells them apart (HUGE_VAL, or the nearest subnormal or zero), in the C locale.
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
  const std::string terminated(text);
  char* end = nullptr;
  const double value = strtod_l(terminated.c_str(), &end, c_locale);
  if (end != terminated.c_str() + terminated.size() || std::isinf(value)) {
    return NumberKind::kOutOfRange;
  }
  out->d = value;
  return NumberKind::kDouble;
}

}  // namespace dais::json::internal
