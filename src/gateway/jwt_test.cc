#include "gateway/jwt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/status_testing.h"
#include "gateway/jwt_cache.h"

namespace dais::gateway {
namespace {

using namespace std::chrono_literals;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1796202000;  // 2026-12-02T09:00:00Z
const std::chrono::system_clock::time_point kNowTime = std::chrono::system_clock::from_time_t(kNow);

// ---- A test-only signer and JWKS writer on OpenSSL ------------------------------------------

template <auto kFree>
struct Free {
  template <typename T>
  void operator()(T* p) const {
    kFree(p);
  }
};
using Pkey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY_free>>;

Pkey NewRsaKey(size_t bits) { return Pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", bits)); }
Pkey NewP256Key() { return Pkey(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")); }

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  EXPECT_EQ(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)), 1);
  return out;
}

// A big-endian key parameter, left-padded to `pad` bytes when pad > 0.
std::string BnParam(const EVP_PKEY* key, const char* name, int pad = 0) {
  BIGNUM* bn = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, name, &bn), 1) << name;
  std::string out(pad > 0 ? pad : BN_num_bytes(bn), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

std::string OctJwk(const std::string& kid, std::string_view secret) {
  return R"({"kty":"oct","kid":")" + kid + R"(","alg":"HS256","k":")" + Base64UrlEncode(secret) +
         R"("})";
}
std::string RsaJwk(const std::string& kid, const EVP_PKEY* key, const std::string& alg = "RS256") {
  return R"({"kty":"RSA","kid":")" + kid + R"(","alg":")" + alg + R"(","use":"sig","n":")" +
         Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_RSA_N)) + R"(","e":")" +
         Base64UrlEncode(BnParam(key, OSSL_PKEY_PARAM_RSA_E)) + R"("})";
}
std::string EcJwk(const std::string& kid, std::string_view x, std::string_view y) {
  return R"({"kty":"EC","kid":")" + kid + R"(","alg":"ES256","crv":"P-256","x":")" +
         Base64UrlEncode(x) + R"(","y":")" + Base64UrlEncode(y) + R"("})";
}
std::string EcJwk(const std::string& kid, const EVP_PKEY* key) {
  return EcJwk(kid, BnParam(key, OSSL_PKEY_PARAM_EC_PUB_X, 32),
               BnParam(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32));
}
std::string JwksOf(const std::vector<std::string>& keys) {
  std::string out = R"({"keys":[)";
  for (size_t i = 0; i < keys.size(); ++i) out += (i > 0 ? "," : "") + keys[i];
  return out + "]}";
}

std::string HmacSha256(std::string_view secret, std::string_view input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

// PKCS#1 v1.5 for RSA, DER ECDSA-Sig-Value for EC.
std::string DigestSign(EVP_PKEY* key, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, Free<EVP_MD_CTX_free>> ctx(EVP_MD_CTX_new());
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key), 1);
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  size_t len = 0;
  EXPECT_EQ(EVP_DigestSign(ctx.get(), nullptr, &len, in, input.size()), 1);
  std::string sig(len, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in,
                           input.size()),
            1);
  sig.resize(len);
  return sig;
}

// JWS wants ES256 signatures as R||S, 32 bytes each.
std::string EcdsaDerToRaw(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, Free<ECDSA_SIG_free>> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
  EXPECT_NE(sig, nullptr);
  const BIGNUM *r = nullptr, *s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string raw(64, '\0');
  BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  return raw;
}

std::string PublicKeyDer(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key, &der);
  std::string out(reinterpret_cast<char*>(der), len);
  OPENSSL_free(der);
  return out;
}

std::string PublicKeyPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, Free<BIO_free>> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

// Claims as name -> JSON text of the value, so a test can change one.
struct Claims {
  std::map<std::string, std::string> json = {
      {"sub", R"("user-7")"},
      {"tenant", R"("acme")"},
      {"iss", R"("https://id.example")"},
      {"aud", R"("dais")"},
      {"iat", std::to_string(kNow - 10)},
      {"exp", std::to_string(kNow + 600)},
  };
  Claims& Set(const std::string& name, const std::string& value) {
    json[name] = value;
    return *this;
  }
  Claims& Erase(const std::string& name) {
    json.erase(name);
    return *this;
  }
  std::string Json() const {
    std::string out = "{";
    for (const auto& [name, value] : json) {
      out += (out.size() > 1 ? ",\"" : "\"") + name + "\":" + value;
    }
    return out + "}";
  }
};

JwtPolicy DefaultPolicy() {
  JwtPolicy p;
  p.issuer = "https://id.example";
  p.audiences = {"dais"};
  return p;
}

std::string Header(const std::string& alg, const std::string& kid) {
  return R"({"alg":")" + alg + R"(","typ":"JWT","kid":")" + kid + R"("})";
}

std::string SigningInput(const std::string& header_json, const std::string& payload_json) {
  return Base64UrlEncode(header_json) + "." + Base64UrlEncode(payload_json);
}

// Keys shared by the tests (RSA key generation takes a while): kids "hs-1", "rs-1", "es-1".
class JwtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = NewRsaKey(2048);
    ec_ = NewP256Key();
    ASSERT_NE(rsa_, nullptr);
    ASSERT_NE(ec_, nullptr);
    secret_ = RandomBytes(32);
    auto jwks = Jwks::Parse(
        JwksOf({OctJwk("hs-1", secret_), RsaJwk("rs-1", rsa_.get()), EcJwk("es-1", ec_.get())}));
    ASSERT_OK(jwks);
    jwks_ = *jwks;
  }
  static void TearDownTestSuite() {
    jwks_.reset();
    rsa_.reset();
    ec_.reset();
  }

  // The signature `alg` makes with the suite's key for that algorithm.
  static std::string Sign(const std::string& alg, const std::string& input) {
    if (alg == "HS256") return HmacSha256(secret_, input);
    if (alg == "RS256") return DigestSign(rsa_.get(), input);
    return EcdsaDerToRaw(DigestSign(ec_.get(), input));
  }
  static std::string KidFor(const std::string& alg) {
    return alg == "HS256" ? "hs-1" : alg == "RS256" ? "rs-1" : "es-1";
  }
  static std::string Token(const std::string& alg, const Claims& claims = Claims()) {
    const std::string input = SigningInput(Header(alg, KidFor(alg)), claims.Json());
    return input + "." + Base64UrlEncode(Sign(alg, input));
  }
  static JwtResult Verify(std::string_view token, const JwtPolicy& policy = DefaultPolicy()) {
    return VerifyJwt(token, *jwks_, policy, kNowTime);
  }

  static inline Pkey rsa_, ec_;
  static inline std::string secret_;
  static inline std::shared_ptr<const Jwks> jwks_;
};

const char* const kAlgs[] = {"HS256", "RS256", "ES256"};

// ---- Base64url -------------------------------------------------------------------------------

TEST(Base64UrlTest, RoundTripsWithoutPadding) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  const std::string bytes = RandomBytes(257);
  for (size_t n = 0; n <= bytes.size(); ++n) {
    ASSERT_OK_AND_ASSIGN(std::string back, Base64UrlDecode(Base64UrlEncode(bytes.substr(0, n))));
    EXPECT_EQ(back, bytes.substr(0, n));
  }
}

TEST(Base64UrlTest, RefusesWhatIsNotCanonicalBase64Url) {
  EXPECT_EQ(Base64UrlDecode("Zg==").status().code(), StatusCode::kInvalidArgument);   // padding
  EXPECT_EQ(Base64UrlDecode("+/8").status().code(), StatusCode::kInvalidArgument);    // base64
  EXPECT_EQ(Base64UrlDecode("Zm9vY").status().code(), StatusCode::kInvalidArgument);  // length
  EXPECT_EQ(Base64UrlDecode("Zh").status().code(), StatusCode::kInvalidArgument);     // spare bits
  EXPECT_THAT(Base64UrlDecode("ab c").status().message(), HasSubstr("offset 2"));
}

// ---- Valid tokens ----------------------------------------------------------------------------

TEST_F(JwtTest, ValidTokenOfEachAlgorithmIsAccepted) {
  for (const std::string alg : kAlgs) {
    const JwtResult r = Verify(Token(alg));
    ASSERT_TRUE(r.ok) << alg << ": " << r.reason << ": " << r.message;
    EXPECT_EQ(r.claims.subject, "user-7");
    EXPECT_EQ(r.claims.issuer, "https://id.example");
    EXPECT_EQ(r.claims.strings.at("tenant"), "acme");
    EXPECT_EQ(r.claims.expires_at, kNow + 600);
    EXPECT_EQ(r.claims.issued_at, kNow - 10);
    EXPECT_EQ(r.claims.alg, alg);
    EXPECT_EQ(r.claims.kid, KidFor(alg));
    EXPECT_TRUE(r.reason.empty());
  }
}

TEST_F(JwtTest, AudienceMayBeAnArray) {
  EXPECT_TRUE(Verify(Token("ES256", Claims().Set("aud", R"(["other","dais"])"))).ok);
  JwtPolicy two = DefaultPolicy();
  two.audiences = {"web", "other"};
  EXPECT_TRUE(Verify(Token("RS256", Claims().Set("aud", R"(["other","dais"])")), two).ok);
  EXPECT_TRUE(Verify(Token("HS256", Claims().Set("aud", R"("web")")), two).ok);
}

TEST_F(JwtTest, NumericDatesMayBeFractional) {
  const JwtResult r = Verify(Token("HS256", Claims().Set("exp", std::to_string(kNow) + ".75e0")));
  ASSERT_TRUE(r.ok) << r.message;  // within the skew
  EXPECT_EQ(r.claims.expires_at, kNow);
}

// ---- Algorithms and keys ---------------------------------------------------------------------

TEST_F(JwtTest, AlgNoneAndOtherAlgorithmsAreRefused) {
  const std::string payload = Base64UrlEncode(Claims().Json());
  for (const std::string alg : {"none", "None", "HS512", "PS256", "RS256 "}) {
    const std::string unsigned_token = Base64UrlEncode(Header(alg, "hs-1")) + "." + payload + ".";
    const JwtResult r = Verify(unsigned_token);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.reason, "unsupported_alg") << alg;
  }
  const JwtResult none = Verify(Base64UrlEncode(R"({"alg":"none"})") + "." + payload + ".");
  EXPECT_EQ(none.reason, "unsupported_alg");
  EXPECT_EQ(none.message, "token algorithm 'none' is not accepted (only HS256, RS256, ES256)");
}

// The classic confusion attack: take the RS256 key's public bytes as an HMAC secret.
TEST_F(JwtTest, PublicKeyUsedAsHmacSecretIsAnAlgMismatch) {
  const std::string n = BnParam(rsa_.get(), OSSL_PKEY_PARAM_RSA_N);
  for (const std::string& secret : {PublicKeyPem(rsa_.get()), PublicKeyDer(rsa_.get()), n}) {
    for (const std::string kid : {"rs-1", "es-1"}) {
      const std::string input = SigningInput(Header("HS256", kid), Claims().Json());
      const JwtResult r = Verify(input + "." + Base64UrlEncode(HmacSha256(secret, input)));
      EXPECT_FALSE(r.ok);
      EXPECT_EQ(r.reason, "alg_mismatch");
    }
  }
  const std::string input = SigningInput(Header("HS256", "rs-1"), Claims().Json());
  EXPECT_EQ(Verify(input + "." + Base64UrlEncode(HmacSha256(n, input))).message,
            "token algorithm 'HS256' is not RS256, the algorithm of key 'rs-1'");
}

TEST_F(JwtTest, RightSignatureUnderAnotherKeysAlgIsAnAlgMismatch) {
  const std::string input = SigningInput(Header("RS256", "es-1"), Claims().Json());
  EXPECT_EQ(Verify(input + "." + Base64UrlEncode(Sign("RS256", input))).reason, "alg_mismatch");
}

TEST_F(JwtTest, UnknownOrMissingKid) {
  const std::string input = SigningInput(Header("HS256", "hs-2"), Claims().Json());
  const JwtResult unknown = Verify(input + "." + Base64UrlEncode(Sign("HS256", input)));
  EXPECT_EQ(unknown.reason, "unknown_key");
  EXPECT_EQ(unknown.message, "no key with kid 'hs-2' in the JWKS");
  const std::string no_kid = SigningInput(R"({"alg":"HS256"})", Claims().Json());
  EXPECT_EQ(Verify(no_kid + "." + Base64UrlEncode(Sign("HS256", no_kid))).reason, "unknown_key");
}

// ---- Signatures ------------------------------------------------------------------------------

TEST_F(JwtTest, TamperedPayloadHasABadSignature) {
  for (const std::string alg : kAlgs) {
    const std::string token = Token(alg);
    const size_t dot1 = token.find('.'), dot2 = token.rfind('.');
    const std::string forged = token.substr(0, dot1 + 1) +
                               Base64UrlEncode(Claims().Set("sub", R"("admin")").Json()) +
                               token.substr(dot2);
    const JwtResult r = Verify(forged);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.reason, "bad_signature") << alg;
    EXPECT_EQ(r.message, "signature does not verify with key '" + KidFor(alg) + "' (" + alg + ")");
  }
}

TEST_F(JwtTest, TruncatedOrAlteredSignatureIsRefused) {
  for (const std::string alg : kAlgs) {
    const std::string token = Token(alg);
    const size_t dot2 = token.rfind('.');
    const std::string input = token.substr(0, dot2);
    ASSERT_OK_AND_ASSIGN(std::string sig, Base64UrlDecode(token.substr(dot2 + 1)));
    const std::string shorter = Base64UrlEncode(sig.substr(0, sig.size() - 1));
    EXPECT_EQ(Verify(input + "." + shorter).reason, "bad_signature") << alg;
    EXPECT_EQ(Verify(input + ".").reason, "bad_signature") << alg;
    std::string flipped = sig;
    flipped[sig.size() / 2] ^= 0x01;
    EXPECT_EQ(Verify(input + "." + Base64UrlEncode(flipped)).reason, "bad_signature") << alg;
    for (size_t cut = 1; cut <= 3; ++cut) {
      const JwtResult r = Verify(token.substr(0, token.size() - cut));
      EXPECT_FALSE(r.ok);
      EXPECT_THAT(r.reason, ::testing::AnyOf("bad_signature", "malformed")) << alg << " " << cut;
    }
  }
}

TEST_F(JwtTest, EcdsaSignatureWithSwappedHalvesIsRefused) {
  const std::string token = Token("ES256");
  const size_t dot2 = token.rfind('.');
  ASSERT_OK_AND_ASSIGN(std::string sig, Base64UrlDecode(token.substr(dot2 + 1)));
  const std::string swapped = sig.substr(32) + sig.substr(0, 32);
  EXPECT_EQ(Verify(token.substr(0, dot2 + 1) + Base64UrlEncode(swapped)).reason, "bad_signature");
}

// ---- Time, issuer, audience ------------------------------------------------------------------

TEST_F(JwtTest, ExpiryBeyondAndWithinTheSkew) {
  const JwtResult expired = Verify(Token("HS256", Claims().Set("exp", std::to_string(kNow - 60))));
  EXPECT_FALSE(expired.ok);
  EXPECT_EQ(expired.reason, "expired");
  EXPECT_EQ(expired.message,
            "token expired at 2026-12-02T08:59:00Z (now 2026-12-02T09:00:00Z, skew 30 s)");
  EXPECT_EQ(expired.claims.subject, "user-7");  // read, though not to be trusted
  EXPECT_TRUE(Verify(Token("HS256", Claims().Set("exp", std::to_string(kNow - 20)))).ok);
  EXPECT_EQ(Verify(Token("HS256", Claims().Set("exp", std::to_string(kNow - 30)))).reason,
            "expired");
  JwtPolicy strict = DefaultPolicy();
  strict.clock_skew = std::chrono::seconds(0);
  EXPECT_EQ(Verify(Token("HS256", Claims().Set("exp", std::to_string(kNow))), strict).reason,
            "expired");
}

TEST_F(JwtTest, NotBeforeAndIssuedAtInTheFuture) {
  const JwtResult early = Verify(Token("RS256", Claims().Set("nbf", std::to_string(kNow + 60))));
  EXPECT_EQ(early.reason, "not_yet_valid");
  EXPECT_EQ(early.message,
            "token is not valid before 2026-12-02T09:01:00Z (now 2026-12-02T09:00:00Z, skew 30 s)");
  EXPECT_TRUE(Verify(Token("RS256", Claims().Set("nbf", std::to_string(kNow + 20)))).ok);
  EXPECT_EQ(Verify(Token("ES256", Claims().Set("iat", std::to_string(kNow + 120)))).reason,
            "not_yet_valid");
}

TEST_F(JwtTest, MissingExp) {
  const std::string token = Token("HS256", Claims().Erase("exp"));
  EXPECT_EQ(Verify(token).reason, "missing_exp");
  JwtPolicy lenient = DefaultPolicy();
  lenient.require_exp = false;
  EXPECT_TRUE(Verify(token, lenient).ok);
}

TEST_F(JwtTest, WrongIssuer) {
  const JwtResult other = Verify(Token("HS256", Claims().Set("iss", R"("https://evil.example")")));
  EXPECT_EQ(other.reason, "wrong_issuer");
  EXPECT_EQ(other.message, "token issuer 'https://evil.example' is not 'https://id.example'");
  EXPECT_EQ(Verify(Token("HS256", Claims().Erase("iss"))).reason, "wrong_issuer");
  JwtPolicy any_issuer = DefaultPolicy();
  any_issuer.issuer.clear();
  EXPECT_TRUE(
      Verify(Token("HS256", Claims().Set("iss", R"("https://evil.example")")), any_issuer).ok);
}

TEST_F(JwtTest, WrongAudience) {
  const JwtResult other = Verify(Token("ES256", Claims().Set("aud", R"(["web","admin"])")));
  EXPECT_EQ(other.reason, "wrong_audience");
  EXPECT_EQ(other.message, "token audience ['web', 'admin'] includes none of ['dais']");
  EXPECT_EQ(Verify(Token("ES256", Claims().Set("aud", "[]"))).reason, "wrong_audience");
  EXPECT_EQ(Verify(Token("ES256", Claims().Erase("aud"))).reason, "wrong_audience");
  JwtPolicy any_audience = DefaultPolicy();
  any_audience.audiences.clear();
  EXPECT_TRUE(Verify(Token("ES256", Claims().Erase("aud")), any_audience).ok);
}

// ---- Malformed input -------------------------------------------------------------------------

TEST_F(JwtTest, ClaimsOfTheWrongTypeAreMalformed) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"exp", R"("tomorrow")"},
                                                        {"nbf", "null"},
                                                        {"iat", "true"},
                                                        {"sub", "7"},
                                                        {"iss", "{}"},
                                                        {"aud", "5"},
                                                        {"aud", R"(["dais",5])"}}) {
    const JwtResult r = Verify(Token("HS256", Claims().Set(name, value)));
    EXPECT_EQ(r.reason, "malformed") << name << "=" << value;
    EXPECT_THAT(r.message, HasSubstr("'" + name + "'"));
  }
  const std::string array_payload = SigningInput(Header("HS256", "hs-1"), "[]");
  EXPECT_EQ(Verify(array_payload + "." + Base64UrlEncode(Sign("HS256", array_payload))).message,
            "token payload is not a JSON object");
}

TEST_F(JwtTest, MalformedTokens) {
  const std::string good = Token("HS256");
  const std::string sig = good.substr(good.rfind('.'));
  const std::string payload = Base64UrlEncode(Claims().Json());
  for (const std::string& token : {
           std::string(), std::string("abc"), good.substr(0, good.rfind('.')),  // two parts
           good + ".e30",                                                       // four parts
           "eyJ*bGciOiJIUzI1NiJ9." + payload + sig,                             // not base64url
           Base64UrlEncode(R"(["HS256"])") + "." + payload + sig,       // header is an array
           Base64UrlEncode(R"({"alg":"HS256")") + "." + payload + sig,  // not JSON
           Base64UrlEncode(R"({"alg":"HS256","kid":7})") + "." + payload + sig,
           Base64UrlEncode(R"({"kid":"hs-1"})") + "." + payload + sig,  // no alg
           Base64UrlEncode(R"({"alg":"HS256","kid":"hs-1","crit":["b64"]})") + "." + payload + sig,
           Base64UrlEncode(std::string(200, '[')) + "." + payload + sig,  // nested too deep
           Base64UrlEncode("{\"alg\":\"HS256\",\"kid\":\"hs-1\",\"x\":\"\xff\"}") + "." + payload +
               sig,  // not UTF-8
       }) {
    const JwtResult r = Verify(token);
    EXPECT_FALSE(r.ok) << token;
    EXPECT_EQ(r.reason, "malformed") << token << ": " << r.message;
  }
  const std::string huge =
      good.substr(0, good.find('.') + 1) + std::string(20 * 1024, 'A') + sig;  // 20 KiB payload
  EXPECT_EQ(Verify(huge).reason, "malformed");
  EXPECT_THAT(Verify(huge).message, HasSubstr("over the limit of 16384"));
}

// Two parsers could read different values from a repeated member: refused.
TEST_F(JwtTest, RepeatedMembersAreMalformed) {
  const std::string header = R"({"alg":"HS256","kid":"hs-1","alg":"none"})";
  const std::string input = SigningInput(header, Claims().Json());
  EXPECT_EQ(Verify(input + "." + Base64UrlEncode(Sign("HS256", input))).reason, "malformed");
  const std::string payload = R"({"sub":"user-7","exp":1,"exp":)" + std::to_string(kNow + 60) + "}";
  const std::string input2 = SigningInput(Header("HS256", "hs-1"), payload);
  const JwtResult r = Verify(input2 + "." + Base64UrlEncode(Sign("HS256", input2)));
  EXPECT_EQ(r.reason, "malformed");
  EXPECT_EQ(r.message, "token payload repeats the member 'exp'");
}

TEST_F(JwtTest, MessagesHoldNoTokenAndNoControlCharacters) {
  const std::string input = SigningInput(Header("HS256", "a\\nb\\u001b[31m"), Claims().Json());
  const JwtResult r = Verify(input + "." + Base64UrlEncode(Sign("HS256", input)));
  EXPECT_EQ(r.reason, "unknown_key");
  EXPECT_EQ(r.message, "no key with kid 'a?b?[31m' in the JWKS");
  EXPECT_EQ(r.claims.kid, "a\nb\x1b[31m");
  const std::string long_kid(1000, 'k');
  const std::string input2 = SigningInput(Header("HS256", long_kid), Claims().Json());
  EXPECT_LT(Verify(input2 + ".").message.size(), 100u);
  const std::string token = Token("HS256", Claims().Set("exp", "1"));
  const JwtResult expired = Verify(token);
  EXPECT_EQ(expired.reason, "expired");
  EXPECT_EQ(expired.message.find(token.substr(token.rfind('.') + 1)), std::string::npos);
}

TEST_F(JwtTest, ManyThreadsShareOneJwks) {
  std::vector<std::string> tokens;
  for (const std::string alg : kAlgs) tokens.push_back(Token(alg));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 30; ++i) {
        for (const std::string& token : tokens) ok += Verify(token).ok ? 1 : 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4 * 30 * 3);
}

// ---- JWKS parsing ----------------------------------------------------------------------------

TEST_F(JwtTest, JwksAccessors) {
  EXPECT_EQ(jwks_->size(), 3u);
  EXPECT_EQ(jwks_->kids(), (std::vector<std::string>{"es-1", "hs-1", "rs-1"}));
  EXPECT_EQ(jwks_->AlgOf("rs-1"), "RS256");
  EXPECT_EQ(jwks_->AlgOf("es-1"), "ES256");
  EXPECT_EQ(jwks_->AlgOf("hs-1"), "HS256");
  EXPECT_EQ(jwks_->AlgOf("nope"), "");
}

TEST_F(JwtTest, JwksErrorsNameTheKeyAndTheField) {
  const std::string x = BnParam(ec_.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32);
  std::string y = BnParam(ec_.get(), OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  std::string off_curve_y = y;
  off_curve_y.back() ^= 0x01;
  Pkey rsa1024 = NewRsaKey(1024);
  std::string no_alg = RsaJwk("rs-1", rsa_.get());
  no_alg.replace(no_alg.find(R"("alg":"RS256",)"), 14, "");
  const std::string good_hs = OctJwk("hs-1", secret_);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {JwksOf({good_hs, no_alg}), "JWKS keys[1] (kid 'rs-1'): 'alg' is missing"},
      {JwksOf({R"({"kty":"oct","alg":"HS256","k":"AAAA"})"}), "JWKS keys[0]: 'kid' is missing"},
      {JwksOf({RsaJwk("rs-1", rsa_.get(), "HS256")}),
       "JWKS keys[0] (kid 'rs-1'): 'alg' HS256 needs 'kty' 'oct', not 'RSA'"},
      {JwksOf({RsaJwk("rs-1", rsa_.get(), "PS256")}),
       "JWKS keys[0] (kid 'rs-1'): 'alg' is 'PS256'; supported: HS256, RS256, ES256"},
      {JwksOf({OctJwk("hs-short", std::string(16, 'k'))}),
       "JWKS keys[0] (kid 'hs-short'): 'k' is a 16-byte secret; HS256 needs at least 32 bytes"},
      {JwksOf({RsaJwk("rs-small", rsa1024.get())}),
       "JWKS keys[0] (kid 'rs-small'): 'n' is a 1024-bit modulus; RS256 keys need 2048 to 16384 "
       "bits"},
      {JwksOf({EcJwk("es-bad", x, off_curve_y)}),
       "JWKS keys[0] (kid 'es-bad'): 'x' and 'y' are not a point on P-256"},
      {JwksOf({EcJwk("es-short", x, y.substr(1))}),
       "JWKS keys[0] (kid 'es-short'): 'y' must be 32 bytes"},
      {JwksOf({good_hs, RsaJwk("rs-1", rsa_.get()), OctJwk("hs-1", secret_)}),
       "JWKS keys[2] (kid 'hs-1'): 'kid' is the kid of an earlier key"},
      {JwksOf({R"({"kty":"oct","kid":"h","alg":"HS256","k":"a+b/"})"}),
       "JWKS keys[0] (kid 'h'): 'k' is not base64url"},
      {JwksOf({R"({"kty":"oct","kid":"h","alg":"HS256","k":7})"}),
       "JWKS keys[0] (kid 'h'): 'k' must be a string"},
      {JwksOf({R"({"kty":"oct","kid":"h","alg":"HS256","use":"enc","k":"AAAA"})"}),
       "JWKS keys[0] (kid 'h'): 'use' is 'enc', not 'sig'"},
      {JwksOf({EcJwk("es-1", ec_.get()).insert(1, R"("d":"AAAA",)")}),
       "JWKS keys[0] (kid 'es-1'): 'd' is private key material"},
      {JwksOf({"[]"}), "JWKS keys[0]: 'keys' member is not a JSON object"},
      {JwksOf({}), "JWKS: 'keys' is empty"},
      {R"({"keys":{}})", "JWKS: 'keys' must be an array"},
      {"[]", "JWKS: not a JSON object"},
      {"{\"keys\":[", "JWKS: malformed JSON"},
  };
  for (const auto& [json, want] : cases) {
    StatusOr<std::shared_ptr<const Jwks>> jwks = Jwks::Parse(json);
    ASSERT_FALSE(jwks.ok()) << want;
    EXPECT_EQ(jwks.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(jwks.status().message(), HasSubstr(want));
  }
  // The messages never hold key material.
  StatusOr<std::shared_ptr<const Jwks>> short_secret =
      Jwks::Parse(JwksOf({OctJwk("hs-short", std::string(16, 'k'))}));
  EXPECT_THAT(short_secret.status().message(),
              ::testing::Not(HasSubstr(Base64UrlEncode(std::string(16, 'k')))));
}

TEST_F(JwtTest, JwksToleratesPaddedValues) {
  const std::string padded = R"({"kty":"oct","kid":"h","alg":"HS256","k":")" +
                             Base64UrlEncode(std::string(32, 'k')) + R"(="})";
  EXPECT_OK(Jwks::Parse(JwksOf({padded})));
}

// ---- JwksFile --------------------------------------------------------------------------------

class JwksFileTest : public JwtTest {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dais-jwks-test-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "jwks.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the file and moves its mtime forward, so that a rewrite within one clock tick is
  // still a change.
  void Write(const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
    fs::last_write_time(path_, fs::file_time_type::clock::now() + std::chrono::seconds(++ticks_));
  }

  fs::path dir_;
  std::string path_;
  int ticks_ = 0;
};

TEST_F(JwksFileTest, ReloadsAChangedFileAndKeepsOldKeysOnABadOne) {
  JwksFile file(path_);
  EXPECT_EQ(file.Current(), nullptr);
  Write(JwksOf({OctJwk("hs-1", secret_)}));
  ASSERT_OK(file.Load());
  ASSERT_NE(file.Current(), nullptr);
  EXPECT_TRUE(VerifyJwt(Token("HS256"), *file.Current(), DefaultPolicy(), kNowTime).ok);
  EXPECT_FALSE(file.ReloadIfChanged());  // unchanged

  Write(JwksOf({RsaJwk("rs-1", rsa_.get())}));
  EXPECT_TRUE(file.ReloadIfChanged());
  std::shared_ptr<const Jwks> rotated = file.Current();
  EXPECT_TRUE(VerifyJwt(Token("RS256"), *rotated, DefaultPolicy(), kNowTime).ok);
  EXPECT_EQ(VerifyJwt(Token("HS256"), *rotated, DefaultPolicy(), kNowTime).reason, "unknown_key");

  Write("{\"keys\": [garbage");
  EXPECT_FALSE(file.ReloadIfChanged());
  EXPECT_EQ(file.Current(), rotated);    // the old keys stay
  EXPECT_FALSE(file.ReloadIfChanged());  // refused once, not re-read until it changes again
  Write(JwksOf({OctJwk("hs-short", "short")}));
  EXPECT_FALSE(file.ReloadIfChanged());
  fs::remove(path_);
  EXPECT_FALSE(file.ReloadIfChanged());
  EXPECT_EQ(file.Current(), rotated);

  Write(JwksOf({EcJwk("es-1", ec_.get())}));
  EXPECT_TRUE(file.ReloadIfChanged());
  EXPECT_TRUE(VerifyJwt(Token("ES256"), *file.Current(), DefaultPolicy(), kNowTime).ok);
}

TEST_F(JwksFileTest, LoadFailsOnAMissingOrInvalidFile) {
  JwksFile missing(path_);
  EXPECT_EQ(missing.Load().code(), StatusCode::kNotFound);
  Write(JwksOf({OctJwk("hs-short", "short")}));
  JwksFile invalid(path_);
  const Status s = invalid.Load();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path_));
  EXPECT_THAT(s.message(), HasSubstr("'k'"));
  EXPECT_EQ(invalid.Current(), nullptr);
  Write(std::string(JwksFile::kMaxFileBytes + 1, ' '));
  EXPECT_THAT(invalid.Load().message(), HasSubstr("over the limit"));
}

// ---- The cache of verified tokens ------------------------------------------------------------

TEST_F(JwtTest, CacheAnswersARepeatedTokenUntilItExpires) {
  JwtCache cache(1000);
  for (const char* alg : kAlgs) {
    const std::string token = Token(alg);
    CachedJwt first = cache.Verify(token, jwks_, DefaultPolicy(), kNowTime);
    ASSERT_NE(first.claims, nullptr) << alg << ": " << first.message;
    EXPECT_FALSE(first.hit);
    CachedJwt again = cache.Verify(token, jwks_, DefaultPolicy(), kNowTime + 10s);
    ASSERT_NE(again.claims, nullptr);
    EXPECT_TRUE(again.hit) << alg;
    EXPECT_EQ(again.claims->strings.at("tenant"), "acme");
    // Past exp + skew (600 s + 30 s): verified again, and refused as VerifyJwt refuses it.
    CachedJwt late = cache.Verify(token, jwks_, DefaultPolicy(), kNowTime + 631s);
    EXPECT_EQ(late.claims, nullptr);
    EXPECT_FALSE(late.hit);
    EXPECT_EQ(late.reason, "expired");
    // A clock stepped back before the verification: verified again (and valid then).
    EXPECT_FALSE(cache.Verify(token, jwks_, DefaultPolicy(), kNowTime - 5s).hit);
  }
}

TEST_F(JwtTest, CacheNeverServesAnotherTokenRefusalsOrAnotherKeySet) {
  JwtCache cache(1000);
  const std::string token = Token("ES256");
  ASSERT_NE(cache.Verify(token, jwks_, DefaultPolicy(), kNowTime).claims, nullptr);
  // A character inside the signature: the last one of an ES256 signature holds 2 bits and 4 zero
  // bits, so changing it could make the base64url non-canonical ("malformed") instead.
  std::string tampered = token;
  char& c = tampered[tampered.size() - 10];
  c = c == 'A' ? 'B' : 'A';
  for (int i = 0; i < 2; ++i) {  // a refusal is not remembered
    CachedJwt bad = cache.Verify(tampered, jwks_, DefaultPolicy(), kNowTime);
    EXPECT_EQ(bad.claims, nullptr);
    EXPECT_FALSE(bad.hit);
    EXPECT_EQ(bad.reason, "bad_signature");
  }
  // A reloaded key set (the same keys, parsed again) verifies anew; one without the token's key
  // refuses it although it was cached.
  auto reloaded = Jwks::Parse(
      JwksOf({OctJwk("hs-1", secret_), RsaJwk("rs-1", rsa_.get()), EcJwk("es-1", ec_.get())}));
  ASSERT_OK(reloaded);
  CachedJwt fresh = cache.Verify(token, *reloaded, DefaultPolicy(), kNowTime);
  EXPECT_NE(fresh.claims, nullptr);
  EXPECT_FALSE(fresh.hit);
  auto without = Jwks::Parse(JwksOf({OctJwk("hs-1", secret_)}));
  ASSERT_OK(without);
  CachedJwt gone = cache.Verify(token, *without, DefaultPolicy(), kNowTime);
  EXPECT_EQ(gone.claims, nullptr);
  EXPECT_EQ(gone.reason, "unknown_key");
}

TEST_F(JwtTest, CacheIsBoundedAndCanBeOff) {
  JwtCache cache(64);
  for (int i = 0; i < 500; ++i) {
    const std::string token = Token("HS256", Claims().Set("sub", "\"u" + std::to_string(i) + "\""));
    ASSERT_NE(cache.Verify(token, jwks_, DefaultPolicy(), kNowTime).claims, nullptr);
  }
  EXPECT_LE(cache.size(), 64u);
  EXPECT_GT(cache.size(), 0u);
  JwtCache off(0);
  const std::string token = Token("HS256");
  EXPECT_NE(off.Verify(token, jwks_, DefaultPolicy(), kNowTime).claims, nullptr);
  EXPECT_FALSE(off.Verify(token, jwks_, DefaultPolicy(), kNowTime).hit);
  EXPECT_EQ(off.size(), 0u);
}

}  // namespace
}  // namespace dais::gateway
