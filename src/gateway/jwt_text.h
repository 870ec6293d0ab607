// Text helpers shared by the JWKS parser (jwks.cc) and the token verifier (jwt.cc): values copied
// from a token or a JWKS into a message are shortened and stripped of control characters.
#pragma once

#include <string>
#include <string_view>

namespace dais::gateway {

// Supported JWS algorithms (jwt.h): HS256, RS256, ES256.
inline bool IsSupportedAlg(std::string_view name) {
  return name == "HS256" || name == "RS256" || name == "ES256";
}

// A value copied from a token or a JWKS for a message: at most 40 bytes, printable ASCII only.
inline std::string Printable(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (s.size() > kMax) out += "...";
  return out;
}

inline std::string Quoted(std::string_view s) { return "'" + Printable(s) + "'"; }

}  // namespace dais::gateway
