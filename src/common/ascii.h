// ASCII helpers for protocol text (HTTP header names and values): no locale, no allocation.
#pragma once

#include <algorithm>
#include <string_view>

namespace dais {

inline char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Equal ignoring ASCII case (HTTP header names, RFC 9110 §5.1).
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

// A CR or LF: such a name or value would split a head into other lines (header injection).
inline bool HasLineBreak(std::string_view s) {
  return s.find_first_of("\r\n") != std::string_view::npos;
}

}  // namespace dais
