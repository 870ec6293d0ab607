// JWT bearer-token verification for the gateway (docs/gateway.md, "Authentication"): JWS compact
// tokens (RFC 7515, RFC 7519) checked against the keys of a JWKS document (RFC 7517/7518), on
// OpenSSL 3's EVP APIs.
//
// Each key names its algorithm ("alg") and a token is checked only with the algorithm of the key
// its "kid" names: "none" is never accepted, and an RS256/ES256 public key is never used as an
// HMAC secret (the HS/RS confusion attack). Supported: HS256 ("oct", secret of at least 32
// bytes), RS256 ("RSA", modulus of at least 2048 bits), ES256 ("EC", P-256). Keys come only from
// the JWKS: a token's "jku", "jwk", "x5u" or "x5c" headers are ignored, and a token with "crit"
// extensions is refused (none is understood).
//
// VerifyJwt bounds its work on hostile input: a token over kMaxTokenBytes is refused before any
// decoding, JSON goes through json::ParseJson (depth-limited), and the signature is checked
// before the payload is parsed. A failure carries a short stable `reason` (a metric label) and a
// sentence for the log; neither holds the token or key material, and values copied from the
// token (kid, alg, iss, aud) are shortened and stripped of control characters.
//
// Threading: a Jwks is immutable after Parse and may be used by any number of threads at once
// (each verification uses its own OpenSSL contexts). JwksFile is thread-safe: Current() may be
// called from request threads while one thread calls ReloadIfChanged(); a reload swaps the whole
// key set, and a request keeps the set it took for as long as it holds the shared_ptr.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "dais/status.h"

namespace dais::gateway {

// Tokens longer than this are refused as "malformed" before they are decoded.
inline constexpr size_t kMaxTokenBytes = 16 * 1024;

// Base64url without padding (RFC 7515 §2). Decode refuses characters outside the alphabet, '='
// padding, an impossible length and non-zero trailing bits (one token has one spelling), with
// InvalidArgument naming the offset (never the input).
StatusOr<std::string> Base64UrlDecode(std::string_view in);
std::string Base64UrlEncode(std::string_view in);

// The verification keys of one JWKS document, by kid.
class Jwks {
 public:
  struct Key;  // An algorithm and its OpenSSL key or HMAC secret (jwks.cc).

  // Parses {"keys": [...]}. Every key needs "kid" (unique) and "alg" (HS256, RS256 or ES256, of
  // the matching "kty"); "use", when present, must be "sig"; RSA and EC keys must not carry
  // private members. InvalidArgument naming the key (its index and kid) and the field on any
  // problem: a missing or mistyped field, bad base64url, an unknown alg, a kty/alg mismatch, an
  // HMAC secret under 32 bytes, an RSA modulus outside 2048..16384 bits or an exponent that is
  // even, 1 or over 64 bits, an EC point not on P-256, a duplicate kid. No key at all is also
  // InvalidArgument (nothing could ever verify).
  static StatusOr<std::shared_ptr<const Jwks>> Parse(std::string_view json);

  ~Jwks();
  Jwks(const Jwks&) = delete;
  Jwks& operator=(const Jwks&) = delete;

  size_t size() const { return keys_.size(); }
  std::vector<std::string> kids() const;
  // The algorithm pinned to key `kid` ("HS256", "RS256" or "ES256"); empty when there is no such
  // key.
  std::string_view AlgOf(std::string_view kid) const;
  // True when `signature` (raw bytes: the HMAC, the RSA signature, or ES256's R||S) is valid for
  // `signing_input` under key `kid` with that key's own algorithm. False for an unknown kid.
  bool VerifySignature(std::string_view kid, std::string_view signing_input,
                       std::string_view signature) const;

 private:
  Jwks();
  std::map<std::string, std::unique_ptr<const Key>, std::less<>> keys_;
};

// A JWKS file on disk, reloaded when it changes (the gateway polls ReloadIfChanged()).
class JwksFile {
 public:
  // Files larger than this are refused (a JWKS is a few KiB).
  static constexpr int64_t kMaxFileBytes = 1 << 20;

  explicit JwksFile(std::string path);

  // Reads and parses the file and installs its keys. InvalidArgument (bad JWKS, too large) or
  // NotFound/Unavailable (cannot stat or read) naming the path; the previous keys, if any, stay.
  Status Load();
  // Re-reads the file when its size, mtime or inode changed since the last look. True when new
  // keys were installed. A file that cannot be read or parsed is refused: the old keys stay, a
  // warning names the problem (once per change of the file), and the result is false.
  bool ReloadIfChanged();
  // The keys in force; nullptr before a successful Load().
  std::shared_ptr<const Jwks> Current() const;
  const std::string& path() const { return path_; }

 private:
  // What identifies one version of the file.
  struct Stamp {
    int64_t size = -1, mtime_ns = 0;
    uint64_t dev = 0, ino = 0;
    bool operator==(const Stamp&) const = default;
  };
  Status StatFile(Stamp* stamp) const;
  StatusOr<std::shared_ptr<const Jwks>> ReadAndParse(const Stamp& stamp) const;

  const std::string path_;
  mutable Mutex mu_;
  std::shared_ptr<const Jwks> current_ DAIS_GUARDED_BY(mu_);
  // The version last looked at, installed or refused (nullopt: none yet).
  std::optional<Stamp> seen_ DAIS_GUARDED_BY(mu_);
  // Serialises Load/ReloadIfChanged (reading and parsing happen outside mu_).
  Mutex reload_mu_;
};

struct JwtPolicy {
  std::string issuer;                  // empty: "iss" not checked
  std::vector<std::string> audiences;  // empty: "aud" not checked; else "aud" must hold one
  std::chrono::seconds clock_skew{30};
  bool require_exp = true;
};

// Numeric dates are seconds since the epoch (fractions dropped); 0 when absent.
struct JwtClaims {
  std::string subject, issuer;
  int64_t expires_at = 0, not_before = 0, issued_at = 0;
  std::map<std::string, std::string> strings;  // every top-level string claim ("sub", "tenant")
  std::string kid;                             // from the header
  std::string alg;                             // from the header
};

struct JwtResult {
  bool ok = false;
  // When !ok: what was read before the failure, not to be trusted.
  JwtClaims claims;
  // When !ok, one of: "malformed", "unsupported_alg", "unknown_key", "alg_mismatch",
  // "bad_signature", "expired", "not_yet_valid", "wrong_issuer", "wrong_audience",
  // "missing_exp" (a Prometheus label; stable).
  std::string reason;
  std::string message;  // a sentence for the log, e.g. "token expired at 2026-12-02T09:00:00Z
                        // (now 2026-12-02T09:05:00Z, skew 30 s)"
};

// Verifies a compact JWS token (without the "Bearer " prefix) against `keys` and `policy` at
// `now`: the header's alg must be the alg of the key its kid names, the signature must verify,
// exp/nbf/iat must hold with the policy's skew (exp: now < exp + skew; nbf and iat: not after
// now + skew), and iss/aud must match the policy.
JwtResult VerifyJwt(std::string_view token, const Jwks& keys, const JwtPolicy& policy,
                    std::chrono::system_clock::time_point now);

}  // namespace dais::gateway
