#include "gateway/jwt.h"

#include <rapidjson/document.h>

#include <cmath>
#include <ctime>
#include <optional>
#include <set>
#include <utility>

#include "common/json.h"
#include "gateway/jwt_text.h"

namespace dais::gateway {
namespace {

// "2026-12-02T09:00:00Z"; years outside 1970..9999 as a plain number of seconds.
std::string FormatTime(int64_t secs) {
  constexpr int64_t kYear10000 = 253402300800;
  if (secs < 0 || secs >= kYear10000) return std::to_string(secs) + " s after the epoch";
  const time_t t = static_cast<time_t>(secs);
  struct tm tm {};
  char buf[32];
  if (gmtime_r(&t, &tm) == nullptr || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return std::to_string(secs) + " s after the epoch";
  }
  return buf;
}

// A NumericDate (seconds, maybe fractional) as whole seconds, clamped to int64.
int64_t WholeSeconds(double d) {
  constexpr double kLimit = 9.2e18;
  if (d >= kLimit) return INT64_MAX;
  if (d <= -kLimit) return INT64_MIN;
  return static_cast<int64_t>(std::floor(d));
}

}  // namespace

// ---- VerifyJwt ---------------------------------------------------------------------------

namespace {

bool Fail(JwtResult* r, const char* reason, std::string message) {
  r->ok = false;
  r->reason = reason;
  r->message = std::move(message);
  return false;
}

// Decodes one part of the token into a JSON object whose member names are unique (with repeats,
// two parsers could read two different tokens: RFC 7515 §5.2 allows refusing them).
bool DecodeObject(std::string_view part, const char* what, rapidjson::Document* doc, JwtResult* r) {
  StatusOr<std::string> text = Base64UrlDecode(part);
  if (!text.ok()) {
    return Fail(r, "malformed", std::string("token ") + what + ": " + text.status().message());
  }
  Status parsed = json::ParseJson<rapidjson::kParseValidateEncodingFlag>(*text, doc);
  if (!parsed.ok())
    return Fail(r, "malformed", std::string("token ") + what + ": " + parsed.message());
  if (!doc->IsObject()) {
    return Fail(r, "malformed", std::string("token ") + what + " is not a JSON object");
  }
  std::set<std::string_view> names;
  for (const auto& m : std::as_const(*doc).GetObject()) {
    if (!names.emplace(m.name.GetString(), m.name.GetStringLength()).second) {
      return Fail(r, "malformed",
                  std::string("token ") + what + " repeats the member " +
                      Quoted({m.name.GetString(), m.name.GetStringLength()}));
    }
  }
  return true;
}

// The header: alg supported, kid known, and the key pinned to that alg.
bool CheckHeader(const rapidjson::Document& h, const Jwks& keys, JwtResult* r) {
  if (h.HasMember("crit")) {
    return Fail(r, "malformed", "token header lists 'crit' extensions; none is supported");
  }
  auto alg = h.FindMember("alg");
  if (alg == h.MemberEnd() || !alg->value.IsString()) {
    return Fail(r, "malformed", "token header has no string 'alg'");
  }
  r->claims.alg.assign(alg->value.GetString(), alg->value.GetStringLength());
  if (!IsSupportedAlg(r->claims.alg)) {
    return Fail(
        r, "unsupported_alg",
        "token algorithm " + Quoted(r->claims.alg) + " is not accepted (only HS256, RS256, ES256)");
  }
  auto kid = h.FindMember("kid");
  if (kid == h.MemberEnd()) return Fail(r, "unknown_key", "token header has no 'kid'");
  if (!kid->value.IsString()) return Fail(r, "malformed", "token header 'kid' is not a string");
  r->claims.kid.assign(kid->value.GetString(), kid->value.GetStringLength());
  const std::string_view key_alg = keys.AlgOf(r->claims.kid);
  if (key_alg.empty()) {
    return Fail(r, "unknown_key", "no key with kid " + Quoted(r->claims.kid) + " in the JWKS");
  }
  if (key_alg != r->claims.alg) {
    return Fail(r, "alg_mismatch",
                "token algorithm " + Quoted(r->claims.alg) + " is not " + std::string(key_alg) +
                    ", the algorithm of key " + Quoted(r->claims.kid));
  }
  return true;
}

struct NumericDates {
  std::optional<double> exp, nbf, iat;
};

// Reads the registered claims by type (a wrong type is "malformed") and every string claim.
bool ReadClaims(const rapidjson::Document& p, NumericDates* dates,
                std::optional<std::vector<std::string>>* audience, JwtResult* r) {
  JwtClaims& c = r->claims;
  for (const auto& m : p.GetObject()) {
    const std::string name(m.name.GetString(), m.name.GetStringLength());
    const rapidjson::Value& v = m.value;
    if (v.IsString()) c.strings[name].assign(v.GetString(), v.GetStringLength());
    if (name == "sub" || name == "iss") {
      if (!v.IsString()) return Fail(r, "malformed", "claim '" + name + "' is not a string");
      (name == "sub" ? c.subject : c.issuer).assign(v.GetString(), v.GetStringLength());
    } else if (name == "exp" || name == "nbf" || name == "iat") {
      if (!v.IsNumber()) return Fail(r, "malformed", "claim '" + name + "' is not a number");
      const bool exp = name == "exp", nbf = name == "nbf";
      std::optional<double>& date = exp ? dates->exp : nbf ? dates->nbf : dates->iat;
      int64_t& secs = exp ? c.expires_at : nbf ? c.not_before : c.issued_at;
      date = v.GetDouble();
      secs = WholeSeconds(*date);
    } else if (name == "aud") {
      audience->emplace();
      if (v.IsString()) {
        (*audience)->emplace_back(v.GetString(), v.GetStringLength());
        continue;
      }
      if (!v.IsArray()) return Fail(r, "malformed", "claim 'aud' is not a string or an array");
      for (const rapidjson::Value& a : v.GetArray()) {
        if (!a.IsString()) return Fail(r, "malformed", "claim 'aud' holds a non-string");
        (*audience)->emplace_back(a.GetString(), a.GetStringLength());
      }
    }
  }
  return true;
}

std::string ListForMessage(const std::vector<std::string>& values) {
  constexpr size_t kMaxListed = 5;
  std::string out = "[";
  for (size_t i = 0; i < values.size() && i < kMaxListed; ++i) {
    out += (i > 0 ? ", " : "") + Quoted(values[i]);
  }
  if (values.size() > kMaxListed) out += ", ...";
  return out + "]";
}

bool CheckTimes(const NumericDates& dates, const JwtPolicy& policy,
                std::chrono::system_clock::time_point now, JwtResult* r) {
  const double now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
  const double skew = static_cast<double>(policy.clock_skew.count());
  auto when = [&](int64_t at) {
    return FormatTime(at) + " (now " + FormatTime(WholeSeconds(now_s)) + ", skew " +
           std::to_string(policy.clock_skew.count()) + " s)";
  };
  if (!dates.exp && policy.require_exp) return Fail(r, "missing_exp", "token has no 'exp' claim");
  if (dates.exp && now_s >= *dates.exp + skew) {
    return Fail(r, "expired", "token expired at " + when(r->claims.expires_at));
  }
  if (dates.nbf && *dates.nbf > now_s + skew) {
    return Fail(r, "not_yet_valid", "token is not valid before " + when(r->claims.not_before));
  }
  if (dates.iat && *dates.iat > now_s + skew) {
    return Fail(r, "not_yet_valid",
                "token claims to be issued at " + when(r->claims.issued_at) + ", in the future");
  }
  return true;
}

bool CheckIssuerAndAudience(const JwtPolicy& policy, bool has_issuer,
                            const std::optional<std::vector<std::string>>& audience, JwtResult* r) {
  if (!policy.issuer.empty()) {
    if (!has_issuer) {
      return Fail(r, "wrong_issuer", "token has no 'iss' (expected " + Quoted(policy.issuer) + ")");
    }
    if (r->claims.issuer != policy.issuer) {
      return Fail(r, "wrong_issuer",
                  "token issuer " + Quoted(r->claims.issuer) + " is not " + Quoted(policy.issuer));
    }
  }
  if (!policy.audiences.empty()) {
    if (!audience) {
      return Fail(r, "wrong_audience",
                  "token has no 'aud' (expected one of " + ListForMessage(policy.audiences) + ")");
    }
    for (const std::string& a : *audience) {
      for (const std::string& want : policy.audiences) {
        if (a == want) return true;
      }
    }
    return Fail(r, "wrong_audience",
                "token audience " + ListForMessage(*audience) + " includes none of " +
                    ListForMessage(policy.audiences));
  }
  return true;
}

}  // namespace

JwtResult VerifyJwt(std::string_view token, const Jwks& keys, const JwtPolicy& policy,
                    std::chrono::system_clock::time_point now) {
  JwtResult r;
  if (token.size() > kMaxTokenBytes) {
    Fail(&r, "malformed",
         "token is " + std::to_string(token.size()) + " bytes, over the limit of " +
             std::to_string(kMaxTokenBytes));
    return r;
  }
  const size_t dot1 = token.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    Fail(&r, "malformed", "token is not three base64url parts separated by '.'");
    return r;
  }
  // Phase 1: the header names the key and the algorithm.
  rapidjson::Document header;
  if (!DecodeObject(token.substr(0, dot1), "header", &header, &r) ||
      !CheckHeader(header, keys, &r)) {
    return r;
  }
  // Phase 2: the signature, before the payload is parsed at all.
  StatusOr<std::string> signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!signature.ok()) {
    Fail(&r, "malformed", "token signature: " + signature.status().message());
    return r;
  }
  if (!keys.VerifySignature(r.claims.kid, token.substr(0, dot2), *signature)) {
    Fail(&r, "bad_signature",
         "signature does not verify with key " + Quoted(r.claims.kid) + " (" + r.claims.alg + ")");
    return r;
  }
  // Phase 3: the claims, by type, then against the policy.
  rapidjson::Document payload;
  NumericDates dates;
  std::optional<std::vector<std::string>> audience;
  if (!DecodeObject(token.substr(dot1 + 1, dot2 - dot1 - 1), "payload", &payload, &r) ||
      !ReadClaims(payload, &dates, &audience, &r) || !CheckTimes(dates, policy, now, &r) ||
      !CheckIssuerAndAudience(policy, r.claims.strings.count("iss") > 0, audience, &r)) {
    return r;
  }
  r.ok = true;
  return r;
}
}  // namespace dais::gateway
