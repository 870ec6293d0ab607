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

// Without the spaces and tabs around it (HTTP's optional whitespace, RFC 9110 §5.6.3).
inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A CR or LF: such a name or value would split a head into other lines (header injection).
// (A plain loop: find_first_of calls memchr over its set once per character, which showed in the
// gateway's profile: it checks every header it forwards.)
inline bool HasLineBreak(std::string_view s) {
  for (const char c : s) {
    if (c == '\r' || c == '\n') return true;
  }
  return false;
}

}  // namespace dais
