#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "common/json.h"
#include "gateway/jwt.h"
#include "gateway/jwt_text.h"

namespace dais::gateway {
namespace {

enum class Alg { kHs256, kRs256, kEs256 };

constexpr size_t kMinHmacSecretBytes = 32;
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 16384;  // OpenSSL's own limit (OPENSSL_RSA_MAX_MODULUS_BITS)
constexpr int kMaxRsaExponentBits = 64;
constexpr size_t kP256CoordinateBytes = 32;

std::string_view AlgName(Alg alg) {
  switch (alg) {
    case Alg::kHs256:
      return "HS256";
    case Alg::kRs256:
      return "RS256";
    case Alg::kEs256:
      return "ES256";
  }
  return "";
}

std::optional<Alg> AlgFromName(std::string_view name) {
  for (Alg alg : {Alg::kHs256, Alg::kRs256, Alg::kEs256}) {
    if (name == AlgName(alg)) return alg;
  }
  return std::nullopt;
}

// unique_ptr deleters for OpenSSL objects.
template <auto kFree>
struct OpenSslFree {
  template <typename T>
  void operator()(T* p) const {
    kFree(p);
  }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, OpenSslFree<EVP_PKEY_CTX_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, OpenSslFree<EVP_MD_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, OpenSslFree<BN_free>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, OpenSslFree<OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, OpenSslFree<OSSL_PARAM_free>>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, OpenSslFree<ECDSA_SIG_free>>;

// The reason of the oldest queued OpenSSL error (the queue is cleared: it is per thread and
// would otherwise leak into unrelated callers).
std::string TakeOpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

BnPtr ToBignum(std::string_view bytes) {
  return BnPtr(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                         static_cast<int>(bytes.size()), nullptr));
}

// ---- Signature checks --------------------------------------------------------------------

bool VerifyHmacSha256(const std::string& secret, std::string_view input,
                      std::string_view signature) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
           &mac_len) == nullptr) {
    ERR_clear_error();
    return false;
  }
  // Constant time: the comparison must not tell an attacker how many leading bytes matched.
  return signature.size() == mac_len && CRYPTO_memcmp(mac, signature.data(), mac_len) == 0;
}

// RSASSA-PKCS1-v1_5 or ECDSA (DER signature) over SHA-256, by the key's type.
bool VerifyDigestSha256(EVP_PKEY* pkey, std::string_view input, std::string_view signature) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const bool ok =
      ctx != nullptr &&
      EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                       input.size()) == 1;
  ERR_clear_error();
  return ok;
}

// JWS carries an ES256 signature as R||S, 32 bytes each (RFC 7518 §3.4); OpenSSL verifies the
// DER ECDSA-Sig-Value. Empty when `raw` is not 64 bytes.
std::string EcdsaRawToDer(std::string_view raw) {
  if (raw.size() != 2 * kP256CoordinateBytes) return {};
  BnPtr r = ToBignum(raw.substr(0, kP256CoordinateBytes));
  BnPtr s = ToBignum(raw.substr(kP256CoordinateBytes));
  EcdsaSigPtr sig(ECDSA_SIG_new());
  if (!r || !s || !sig || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return {};
  (void)r.release();  // owned by `sig` now
  (void)s.release();
  unsigned char* der = nullptr;
  const int len = i2d_ECDSA_SIG(sig.get(), &der);
  if (len <= 0) {
    ERR_clear_error();
    return {};
  }
  std::string out(reinterpret_cast<const char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

// ---- JWKS keys ---------------------------------------------------------------------------

// One member of "keys", with errors that name it: "JWKS keys[1] (kid 'a'): 'n' is missing".
class KeyFields {
 public:
  KeyFields(const rapidjson::Value& v, size_t index) : v_(v), where_("JWKS keys[") {
    where_ += std::to_string(index) + "]";
  }
  void SetKid(std::string_view kid) { where_ += " (kid " + Quoted(kid) + ")"; }

  Status Error(std::string_view field, std::string_view problem) const {
    return InvalidArgument(where_ + ": '" + std::string(field) + "' " + std::string(problem));
  }
  bool Has(const char* field) const { return v_.HasMember(field); }
  // A required string member.
  StatusOr<std::string> String(const char* field) const {
    auto it = v_.FindMember(field);
    if (it == v_.MemberEnd()) return Error(field, "is missing");
    if (!it->value.IsString()) return Error(field, "must be a string");
    return std::string(it->value.GetString(), it->value.GetStringLength());
  }
  // A required base64url member, decoded. JWKS producers sometimes pad: '=' is tolerated here.
  StatusOr<std::string> Bytes(const char* field) const {
    ASSIGN_OR_RETURN(std::string text, String(field));
    while (!text.empty() && text.back() == '=') text.pop_back();
    StatusOr<std::string> bytes = Base64UrlDecode(text);
    if (!bytes.ok()) return Error(field, "is not base64url (" + bytes.status().message() + ")");
    if (bytes->empty()) return Error(field, "is empty");
    return bytes;
  }

 private:
  const rapidjson::Value& v_;
  std::string where_;
};

StatusOr<PkeyPtr> PublicKeyFromParams(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return InvalidArgument(TakeOpenSslError());
  }
  return PkeyPtr(raw);
}

StatusOr<PkeyPtr> RsaPublicKey(const KeyFields& f) {
  ASSIGN_OR_RETURN(const std::string n_bytes, f.Bytes("n"));
  ASSIGN_OR_RETURN(const std::string e_bytes, f.Bytes("e"));
  BnPtr n = ToBignum(n_bytes), e = ToBignum(e_bytes);
  if (!n || !e) return Internal("out of memory building an RSA key");
  const int bits = BN_num_bits(n.get());
  if (bits < kMinRsaBits || bits > kMaxRsaBits) {
    return f.Error("n", "is a " + std::to_string(bits) + "-bit modulus; RS256 keys need " +
                            std::to_string(kMinRsaBits) + " to " + std::to_string(kMaxRsaBits) +
                            " bits");
  }
  if (!BN_is_odd(n.get())) return f.Error("n", "is even: not an RSA modulus");
  if (!BN_is_odd(e.get()) || BN_is_one(e.get()) || BN_num_bits(e.get()) > kMaxRsaExponentBits) {
    return f.Error("e", "must be an odd exponent from 3 to 2^64 (usually 65537)");
  }
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) != 1) {
    return Internal("building RSA key parameters: " + TakeOpenSslError());
  }
  StatusOr<PkeyPtr> key = PublicKeyFromParams("RSA", bld.get());
  if (!key.ok()) return f.Error("n", "and 'e' are not an RSA key: " + key.status().message());
  return key;
}

StatusOr<PkeyPtr> P256PublicKey(const KeyFields& f) {
  ASSIGN_OR_RETURN(const std::string crv, f.String("crv"));
  if (crv != "P-256") return f.Error("crv", "is " + Quoted(crv) + "; ES256 needs 'P-256'");
  ASSIGN_OR_RETURN(const std::string x, f.Bytes("x"));
  ASSIGN_OR_RETURN(const std::string y, f.Bytes("y"));
  if (x.size() != kP256CoordinateBytes) return f.Error("x", "must be 32 bytes");
  if (y.size() != kP256CoordinateBytes) return f.Error("y", "must be 32 bytes");
  const std::string point = "\x04" + x + y;  // uncompressed SEC1 point
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1,
                                      0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return Internal("building EC key parameters: " + TakeOpenSslError());
  }
  StatusOr<PkeyPtr> key = PublicKeyFromParams("EC", bld.get());
  if (!key.ok()) {
    return f.Error("x", "and 'y' are not a point on P-256 (" + key.status().message() + ")");
  }
  // fromdata decodes the point; the public check also refuses infinity and a wrong order.
  PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key->get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return f.Error("x", "and 'y' are not a point on P-256 (" + TakeOpenSslError() + ")");
  }
  return key;
}

}  // namespace

struct Jwks::Key {
  Alg alg = Alg::kHs256;
  std::string secret;  // HS256
  PkeyPtr pkey;        // RS256, ES256

  ~Key() { OPENSSL_cleanse(secret.data(), secret.size()); }
};

namespace {

// Members that only a private key has: a verifier's JWKS must not hold them (RFC 7518 §6).
Status RefusePrivateMembers(const KeyFields& f, std::initializer_list<const char*> members) {
  for (const char* m : members) {
    if (f.Has(m)) return f.Error(m, "is private key material; a JWKS holds public keys only");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<Jwks::Key>> ParseKey(const rapidjson::Value& v, size_t index,
                                              std::string* kid) {
  KeyFields f(v, index);
  if (!v.IsObject()) return f.Error("keys", "member is not a JSON object");
  ASSIGN_OR_RETURN(*kid, f.String("kid"));
  if (kid->empty()) return f.Error("kid", "is empty");
  f.SetKid(*kid);
  ASSIGN_OR_RETURN(const std::string alg_name, f.String("alg"));
  ASSIGN_OR_RETURN(const std::string kty, f.String("kty"));
  if (f.Has("use")) {
    ASSIGN_OR_RETURN(const std::string use, f.String("use"));
    if (use != "sig") return f.Error("use", "is " + Quoted(use) + ", not 'sig'");
  }
  const std::optional<Alg> alg = AlgFromName(alg_name);
  if (!alg) return f.Error("alg", "is " + Quoted(alg_name) + "; supported: HS256, RS256, ES256");
  static constexpr std::string_view kKtyOf[] = {"oct", "RSA", "EC"};  // by Alg
  const std::string_view want_kty = kKtyOf[static_cast<int>(*alg)];
  if (kty != want_kty) {
    return f.Error("alg", std::string(AlgName(*alg)) + " needs 'kty' " + Quoted(want_kty) +
                              ", not " + Quoted(kty));
  }
  auto key = std::make_unique<Jwks::Key>();
  key->alg = *alg;
  switch (*alg) {
    case Alg::kHs256: {
      ASSIGN_OR_RETURN(key->secret, f.Bytes("k"));
      if (key->secret.size() < kMinHmacSecretBytes) {
        return f.Error("k", "is a " + std::to_string(key->secret.size()) +
                                "-byte secret; HS256 needs at least 32 bytes");
      }
      break;
    }
    case Alg::kRs256: {
      RETURN_IF_ERROR(RefusePrivateMembers(f, {"d", "p", "q", "dp", "dq", "qi", "oth"}));
      ASSIGN_OR_RETURN(key->pkey, RsaPublicKey(f));
      break;
    }
    case Alg::kEs256: {
      RETURN_IF_ERROR(RefusePrivateMembers(f, {"d"}));
      ASSIGN_OR_RETURN(key->pkey, P256PublicKey(f));
      break;
    }
  }
  return key;
}

}  // namespace

// ---- Base64url ---------------------------------------------------------------------------

StatusOr<std::string> Base64UrlDecode(std::string_view in) {
  if (in.size() % 4 == 1) {
    return InvalidArgument("base64url: " + std::to_string(in.size()) +
                           " characters cannot encode whole bytes");
  }
  std::string out;
  out.reserve(in.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-') {
      v = 62;
    } else if (c == '_') {
      v = 63;
    } else {
      return InvalidArgument("base64url: character at offset " + std::to_string(i) +
                             " is not in the alphabet");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
      acc &= (1u << bits) - 1;
    }
  }
  if (acc != 0) return InvalidArgument("base64url: the last character has non-zero spare bits");
  return out;
}

std::string Base64UrlEncode(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    acc = (acc << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
    acc &= (1u << bits) - 1;
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

// ---- Jwks --------------------------------------------------------------------------------

Jwks::Jwks() = default;
Jwks::~Jwks() = default;

StatusOr<std::shared_ptr<const Jwks>> Jwks::Parse(std::string_view json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson(json, &doc).WithPrefix("JWKS"));
  const rapidjson::Document& d = doc;  // const iterators (clang: -Wambiguous-reversed-operator)
  if (!d.IsObject()) return InvalidArgument("JWKS: not a JSON object");
  auto keys = d.FindMember("keys");
  if (keys == d.MemberEnd() || !keys->value.IsArray()) {
    return InvalidArgument("JWKS: 'keys' must be an array");
  }
  std::shared_ptr<Jwks> jwks(new Jwks());
  size_t index = 0;
  for (const rapidjson::Value& v : keys->value.GetArray()) {
    std::string kid;
    ASSIGN_OR_RETURN(std::unique_ptr<Key> key, ParseKey(v, index, &kid));
    if (!jwks->keys_.emplace(kid, std::move(key)).second) {
      return InvalidArgument("JWKS keys[" + std::to_string(index) + "] (kid " + Quoted(kid) +
                             "): 'kid' is the kid of an earlier key");
    }
    ++index;
  }
  if (jwks->keys_.empty()) return InvalidArgument("JWKS: 'keys' is empty");
  return std::shared_ptr<const Jwks>(std::move(jwks));
}

std::vector<std::string> Jwks::kids() const {
  std::vector<std::string> out;
  for (const auto& [kid, key] : keys_) out.push_back(kid);
  return out;
}

std::string_view Jwks::AlgOf(std::string_view kid) const {
  auto it = keys_.find(kid);
  return it == keys_.end() ? std::string_view() : AlgName(it->second->alg);
}

bool Jwks::VerifySignature(std::string_view kid, std::string_view signing_input,
                           std::string_view signature) const {
  auto it = keys_.find(kid);
  if (it == keys_.end()) return false;
  const Key& key = *it->second;
  switch (key.alg) {
    case Alg::kHs256:
      return VerifyHmacSha256(key.secret, signing_input, signature);
    case Alg::kRs256:
      return VerifyDigestSha256(key.pkey.get(), signing_input, signature);
    case Alg::kEs256: {
      const std::string der = EcdsaRawToDer(signature);
      return !der.empty() && VerifyDigestSha256(key.pkey.get(), signing_input, der);
    }
  }
  return false;
}

}  // namespace dais::gateway
