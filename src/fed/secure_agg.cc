#include "fed/secure_agg.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dais::fed {

std::vector<uint64_t> Encode(const std::vector<float>& delta, int64_t weight) {
  std::vector<uint64_t> out(delta.size() + 1);
  for (size_t i = 0; i < delta.size(); ++i) {
    const double v =
        std::clamp(static_cast<double>(delta[i]) * static_cast<double>(weight) * kFixedScale,
                   -kMaxEncoded, kMaxEncoded);
    out[i] = static_cast<uint64_t>(std::llround(v));  // two's complement: mod 2^64
  }
  out.back() = static_cast<uint64_t>(weight);
  return out;
}

std::vector<float> DecodeMean(const std::vector<uint64_t>& sum, int64_t* total_weight) {
  if (sum.empty()) return {};
  const int64_t w = static_cast<int64_t>(sum.back());
  *total_weight = w;
  std::vector<float> out(sum.size() - 1);
  for (size_t i = 0; i + 1 < sum.size(); ++i) {
    const double v = static_cast<double>(static_cast<int64_t>(sum[i])) / kFixedScale;
    out[i] = w > 0 ? static_cast<float>(v / static_cast<double>(w)) : 0.0f;
  }
  return out;
}

void AddInto(std::vector<uint64_t>* sum, const std::vector<uint64_t>& v) {
  if (sum->empty()) sum->assign(v.size(), 0);
  for (size_t i = 0; i < sum->size() && i < v.size(); ++i) (*sum)[i] += v[i];  // mod 2^64
}

struct KeyPair::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

KeyPair::KeyPair(KeyPair&&) noexcept = default;
KeyPair& KeyPair::operator=(KeyPair&&) noexcept = default;
KeyPair::~KeyPair() = default;

StatusOr<KeyPair> KeyPair::Generate() {
  KeyPair k;
  k.key_ = std::make_unique<Key>();
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr);
  const bool ok =
      ctx != nullptr && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &k.key_->pkey) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return Internal("X25519 key generation failed");
  unsigned char pub[32];
  size_t len = sizeof(pub);
  if (EVP_PKEY_get_raw_public_key(k.key_->pkey, pub, &len) != 1 || len != 32) {
    return Internal("X25519: no public key");
  }
  k.public_.assign(reinterpret_cast<const char*>(pub), len);
  return k;
}

StatusOr<std::string> KeyPair::PairSeed(const std::string& peer_public,
                                        const std::string& round) const {
  if (peer_public.size() != 32) {
    return InvalidArgument("a public key of " + std::to_string(peer_public.size()) +
                           " bytes (X25519: 32)");
  }
  EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_X25519, nullptr, reinterpret_cast<const unsigned char*>(peer_public.data()), 32);
  if (peer == nullptr) return InvalidArgument("not an X25519 public key");
  unsigned char shared[32];
  size_t shared_len = sizeof(shared);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(key_->pkey, nullptr);
  const bool agreed = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 &&
                      EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
                      EVP_PKEY_derive(ctx, shared, &shared_len) == 1 && shared_len == 32;
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  if (!agreed) return InvalidArgument("X25519 agreement failed (a degenerate public key?)");
  unsigned char seed[32];
  size_t seed_len = sizeof(seed);
  static const char kInfo[] = "dais-fed pairwise mask";
  EVP_PKEY_CTX* kdf = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  const bool derived =
      kdf != nullptr && EVP_PKEY_derive_init(kdf) == 1 &&
      EVP_PKEY_CTX_set_hkdf_md(kdf, EVP_sha256()) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_salt(kdf, reinterpret_cast<const unsigned char*>(round.data()),
                                  static_cast<int>(round.size())) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_key(kdf, shared, 32) == 1 &&
      EVP_PKEY_CTX_add1_hkdf_info(kdf, reinterpret_cast<const unsigned char*>(kInfo),
                                  sizeof(kInfo) - 1) == 1 &&
      EVP_PKEY_derive(kdf, seed, &seed_len) == 1;
  EVP_PKEY_CTX_free(kdf);
  OPENSSL_cleanse(shared, sizeof(shared));
  if (!derived) return Internal("HKDF failed");
  return std::string(reinterpret_cast<const char*>(seed), seed_len);
}

std::vector<uint64_t> MaskStream(const std::string& seed, size_t n) {
  std::vector<uint64_t> out(n, 0);
  unsigned char key[32] = {};
  std::memcpy(key, seed.data(), std::min<size_t>(seed.size(), sizeof(key)));
  const unsigned char iv[16] = {};
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  // The keystream: ChaCha20 of zeros, in pieces (EVP takes an int length).
  if (ctx == nullptr || EVP_EncryptInit_ex(ctx, EVP_chacha20(), nullptr, key, iv) != 1) {
    std::abort();  // (a broken libcrypto: no safe way to go on masking)
  }
  constexpr size_t kPiece = size_t{1} << 26;
  for (size_t at = 0, total = n * sizeof(uint64_t); at < total; at += kPiece) {
    const int piece = static_cast<int>(std::min(kPiece, total - at));
    if (EVP_EncryptUpdate(ctx, bytes + at, &len, bytes + at, piece) != 1) std::abort();
  }
  EVP_CIPHER_CTX_free(ctx);
  OPENSSL_cleanse(key, sizeof(key));
  return out;
}

StatusOr<std::vector<uint64_t>> Mask(std::vector<uint64_t> encoded, const std::string& self,
                                     const KeyPair& keys,
                                     const std::map<std::string, std::string>& roster,
                                     const std::string& round) {
  if (!roster.count(self)) return InvalidArgument("client " + self + " is not in the roster");
  for (const auto& [peer, pub] : roster) {
    if (peer == self) continue;
    auto seed = keys.PairSeed(pub, round);
    if (!seed.ok()) return InvalidArgument("peer " + peer + ": " + seed.status().message());
    const std::vector<uint64_t> m = MaskStream(*seed, encoded.size());
    for (size_t i = 0; i < encoded.size(); ++i) {
      encoded[i] = self < peer ? encoded[i] + m[i] : encoded[i] - m[i];
    }
  }
  return encoded;
}

void RemoveDangling(std::vector<uint64_t>* sum, const std::string& survivor,
                    const std::string& dropped, const std::string& seed) {
  const std::vector<uint64_t> m = MaskStream(seed, sum->size());
  for (size_t i = 0; i < sum->size(); ++i) {
    (*sum)[i] = survivor < dropped ? (*sum)[i] - m[i] : (*sum)[i] + m[i];
  }
}

}  // namespace dais::fed
