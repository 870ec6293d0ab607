#include "features/offline/offline_fields.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "common/ascii.h"
#include "features/offline/offline_files.h"
#include "fmt/format.h"

namespace dais::features {
namespace internal {

// Reals that are exact integers: an integral real id beyond this has lost digits.
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53
constexpr int64_t kMaxExactIntI = int64_t{1} << 53;
// Deepest nesting of arrays in a JSON feature value.
constexpr int kMaxJsonDepth = 32;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EndsWithNoCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && EqualsIgnoreCase(s.substr(s.size() - suffix.size()), suffix);
}

// Text shown in a message: at most 40 bytes of it.
std::string Quote(std::string_view s) {
  if (s.size() > 40) return fmt::format("\"{}...\"", s.substr(0, 40));
  return fmt::format("\"{}\"", s);
}

// ---- Values ----

// One element written as text: a number or true/false (any case).
Status AppendToken(DataType type, std::string_view tok, std::string* out) {
  Scalar v;
  if (EqualsIgnoreCase(tok, "true")) {
    v = Scalar::Int(1);
  } else if (EqualsIgnoreCase(tok, "false")) {
    v = Scalar::Int(0);
  } else if (!ParseNumber(tok, &v)) {
    return InvalidArgument(fmt::format("{} is not a number", Quote(tok)));
  }
  return AppendElement(type, v, out);
}

Status CountMismatch(const FeatureDef& f, int64_t got) {
  return InvalidArgument(fmt::format("expected {} values, got {}", f.elements, got));
}

// A feature written as text: empty (default), a scalar, or an array (see CSV in the header).
Status AppendFeatureText(const FeatureDef& f, std::string_view text, std::string* out) {
  text = Trim(text);
  if (text.empty()) {
    out->append(f.default_bytes);
    return OkStatus();
  }
  if (text.front() != '[') {
    if (f.elements != 1) {
      return InvalidArgument(
          fmt::format("expected an array of {} values, got {}", f.elements, Quote(text)));
    }
    return AppendToken(f.dtype, text, out);
  }
  // Iterative: '[' and ']' nest, ',' and spaces separate, anything else is an element.
  const size_t start = out->size();
  int64_t count = 0;
  int depth = 0;
  bool closed = false;                          // the outermost array has ended
  enum { kOpen, kValue, kComma } last = kOpen;  // what came before
  size_t p = 0;
  while (p < text.size()) {
    const char c = text[p];
    if (closed) {
      return InvalidArgument(fmt::format("text after the array: {}", Quote(text.substr(p))));
    }
    if (IsSpace(c)) {
      ++p;
    } else if (c == '[') {
      ++depth;
      last = kOpen;
      ++p;
    } else if (c == ']') {
      if (last == kComma) return InvalidArgument("an array element is missing before ']'");
      closed = --depth == 0;
      last = kValue;
      ++p;
    } else if (c == ',') {
      if (last != kValue) return InvalidArgument("an array element is missing before ','");
      last = kComma;
      ++p;
    } else {
      size_t e = p;
      while (e < text.size() && !IsSpace(text[e]) && text[e] != ',' && text[e] != '[' &&
             text[e] != ']') {
        ++e;
      }
      if (depth == 0) return InvalidArgument("array element outside the brackets");
      if (count < f.elements) {
        Status st = AppendToken(f.dtype, text.substr(p, e - p), out);
        if (!st.ok()) return st.WithPrefix(fmt::format("element {}", count));
      }
      ++count;
      last = kValue;
      p = e;
    }
  }
  if (!closed) return InvalidArgument("the array has no closing ']'");
  if (count != f.elements) {
    out->resize(start);
    return CountMismatch(f, count);
  }
  return OkStatus();
}

Status JsonScalar(const rapidjson::Value& v, Scalar* out) {
  if (v.IsBool()) {
    *out = Scalar::Int(v.GetBool() ? 1 : 0);
  } else if (v.IsInt64()) {
    *out = Scalar::Int(v.GetInt64());
  } else if (v.IsNumber()) {
    *out = Scalar::Real(v.GetDouble());
  } else {
    return InvalidArgument("expected a number");
  }
  return OkStatus();
}

Status AppendJsonArray(const FeatureDef& f, const rapidjson::Value& a, int depth, int64_t* count,
                       std::string* out) {
  if (depth > kMaxJsonDepth) return InvalidArgument("arrays nested too deep");
  for (const rapidjson::Value& e : a.GetArray()) {
    if (e.IsArray()) {
      RETURN_IF_ERROR(AppendJsonArray(f, e, depth + 1, count, out));
      continue;
    }
    Scalar v;
    Status st = JsonScalar(e, &v);
    if (st.ok() && *count < f.elements) st = AppendElement(f.dtype, v, out);
    if (!st.ok()) return st.WithPrefix(fmt::format("element {}", *count));
    ++*count;
  }
  return OkStatus();
}

Status AppendFeatureJson(const FeatureDef& f, const rapidjson::Value& v, std::string* out) {
  if (v.IsNull()) {
    out->append(f.default_bytes);
    return OkStatus();
  }
  if (v.IsString()) {
    return AppendFeatureText(f, std::string_view(v.GetString(), v.GetStringLength()), out);
  }
  if (v.IsArray()) {
    const size_t start = out->size();
    int64_t count = 0;
    RETURN_IF_ERROR(AppendJsonArray(f, v, 1, &count, out));
    if (count != f.elements) {
      out->resize(start);
      return CountMismatch(f, count);
    }
    return OkStatus();
  }
  if (f.elements != 1) {
    return InvalidArgument(fmt::format("expected an array of {} values", f.elements));
  }
  Scalar s;
  RETURN_IF_ERROR(JsonScalar(v, &s));
  return AppendElement(f.dtype, s, out);
}

// An entity id written as text. An int64 id may be written as an exact real ("42.0").
StatusOr<std::string> EntityFromText(KeyType type, std::string_view text) {
  if (type == KeyType::kInt64) {
    text = Trim(text);
    const size_t dot = text.find('.');
    if (dot != std::string_view::npos && dot > 0 && dot + 1 < text.size() &&
        text.find_first_not_of('0', dot + 1) == std::string_view::npos) {
      auto id = CanonicalEntityId(type, text.substr(0, dot));
      if (id.ok()) {
        int64_t v = 0;
        std::from_chars(id->data(), id->data() + id->size(), v);
        if (v >= -kMaxExactIntI && v <= kMaxExactIntI) return id;
      }
    }
  }
  return CanonicalEntityId(type, text);
}

StatusOr<std::string> EntityFromJson(KeyType type, const rapidjson::Value& v) {
  if (v.IsString())
    return EntityFromText(type, std::string_view(v.GetString(), v.GetStringLength()));
  if (v.IsInt64()) return CanonicalEntityId(type, std::to_string(v.GetInt64()));
  if (v.IsUint64()) return CanonicalEntityId(type, std::to_string(v.GetUint64()));
  if (type == KeyType::kInt64 && v.IsNumber()) {
    const double d = v.GetDouble();
    if (std::trunc(d) == d && std::fabs(d) <= kMaxExactInt) {
      return std::to_string(static_cast<int64_t>(d));
    }
    return InvalidArgument(fmt::format("entity id {} is not an int64", d));
  }
  return InvalidArgument(type == KeyType::kInt64 ? "entity id must be an integer"
                                                 : "entity id must be a string or an integer");
}

// ---- Calendar (Howard Hinnant's days_from_civil / civil_from_days) ----

int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2);
}

int64_t DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

// `n` decimal digits at s[pos]; false when s is too short or holds a non-digit there.
bool Digits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t k = pos; k < pos + n; ++k) {
    if (s[k] < '0' || s[k] > '9') return false;
    v = v * 10 + (s[k] - '0');
  }
  *out = v;
  return true;
}

// "YYYY-MM-DD" at the start of s, a real date: its day number.
bool ParseDate(std::string_view s, int64_t* days) {
  int64_t y, m, d;
  if (!Digits(s, 0, 4, &y) || s.size() < 10 || s[4] != '-' || !Digits(s, 5, 2, &m) || s[7] != '-' ||
      !Digits(s, 8, 2, &d)) {
    return false;
  }
  if (m < 1 || m > 12 || d < 1 || d > DaysInMonth(y, m)) return false;
  *days = DaysFromCivil(y, m, d);
  return true;
}

bool IsDate(std::string_view s) {
  int64_t days;
  return s.size() == 10 && ParseDate(s, &days);
}

// ISO-8601 date-time (see TIMESTAMPS in the header); s is trimmed.
bool ParseIsoUs(std::string_view s, int64_t* us) {
  int64_t days;
  if (!ParseDate(s, &days)) return false;
  int64_t h = 0, mi = 0, sec = 0, frac_us = 0, offset_s = 0;
  size_t p = 10;
  if (p < s.size()) {
    if (s[p] != 'T' && s[p] != 't' && s[p] != ' ') return false;
    if (!Digits(s, p + 1, 2, &h) || p + 3 >= s.size() || s[p + 3] != ':' ||
        !Digits(s, p + 4, 2, &mi)) {
      return false;
    }
    p += 6;
    if (p < s.size() && s[p] == ':') {
      if (!Digits(s, p + 1, 2, &sec)) return false;
      p += 3;
      if (p < s.size() && (s[p] == '.' || s[p] == ',')) {
        ++p;
        size_t n = 0;
        for (; p < s.size() && s[p] >= '0' && s[p] <= '9'; ++p, ++n) {
          if (n < 6) frac_us = frac_us * 10 + (s[p] - '0');
        }
        if (n == 0) return false;
        for (; n < 6; ++n) frac_us *= 10;
      }
    }
    if (h > 23 || mi > 59 || sec > 59) return false;
    if (p < s.size()) {
      if (s[p] == 'Z' || s[p] == 'z') {
        ++p;
      } else if (s[p] == '+' || s[p] == '-') {
        const int64_t sign = s[p] == '+' ? 1 : -1;
        int64_t oh = 0, om = 0;
        if (!Digits(s, p + 1, 2, &oh)) return false;
        p += 3;
        if (p < s.size() && s[p] == ':') ++p;
        if (p < s.size()) {
          if (!Digits(s, p, 2, &om)) return false;
          p += 2;
        }
        if (oh > 23 || om > 59) return false;
        offset_s = sign * (oh * 3600 + om * 60);
      }
    }
    if (p != s.size()) return false;
  }
  *us = ((days * 86400 + h * 3600 + mi * 60 + sec) - offset_s) * 1000000 + frac_us;
  return true;
}

// A whole-text number: an int64 when it is one, else a double (from_chars takes "nan", "inf").
bool ParseNumber(std::string_view s, Scalar* out) {
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  int64_t i;
  auto [pi, ei] = std::from_chars(s.data(), end, i);
  if (ei == std::errc() && pi == end) {
    *out = Scalar::Int(i);
    return true;
  }
  double d;
  auto [pd, ed] = std::from_chars(s.data(), end, d);
  if (ed == std::errc() && pd == end) {
    *out = Scalar::Real(d);
    return true;
  }
  return false;
}

StatusOr<int64_t> NumberToUs(const Scalar& v) {
  if (v.is_int) {
    const int64_t i = v.i;
    if (i > -100000000000LL && i < 100000000000LL) return i * 1000000;     // seconds
    if (i > -100000000000000LL && i < 100000000000000LL) return i * 1000;  // milliseconds
    if (i > -100000000000000000LL && i < 100000000000000000LL) return i;   // microseconds
    return i / 1000;                                                       // nanoseconds
  }
  const double d = v.d;
  const double a = std::fabs(d);
  if (!std::isfinite(d) || a >= 9.2e18) {
    return InvalidArgument(fmt::format("{} is not a timestamp", d));
  }
  if (a < 1e11) return static_cast<int64_t>(std::llround(d * 1e6));
  if (a < 1e14) return static_cast<int64_t>(std::llround(d * 1e3));
  if (a < 1e17) return static_cast<int64_t>(std::llround(d));
  return static_cast<int64_t>(std::llround(d / 1e3));
}

}  // namespace internal

std::string UtcDate(int64_t unix_seconds) {
  int64_t days = unix_seconds / 86400;
  if (unix_seconds % 86400 < 0) --days;
  int64_t y, m, d;
  internal::CivilFromDays(days, &y, &m, &d);
  return fmt::format("{:04}-{:02}-{:02}", y, m, d);
}

}  // namespace dais::features
