// Secure aggregation for `dais fed` (docs/federated.md, "Privacy"): the aggregator learns the sum
// of a round's updates and nothing of any one of them. Pairwise masks after Bonawitz et al.
// (CCS 2017), without its double masking (see below):
//   1. each client of the round makes an X25519 key pair and publishes its public key;
//   2. the aggregator sends every client the round's roster (client id -> public key);
//   3. client i encodes its weighted update in fixed point in Z_2^64 (Encode), and for each
//      peer j adds (i < j) or subtracts (i > j) a stream expanded by ChaCha20 from the seed
//      s_ij = HKDF-SHA256(X25519(i, j), round): the masks of i and j cancel in the sum;
//   4. the aggregator adds what the survivors sent; for a client that dropped out after the
//      roster, each survivor reveals its pairwise seed with it (PairSeed), and the aggregator
//      takes the survivors' dangling masks out (RemoveDangling).
// Threat model: an honest-but-curious aggregator that follows the protocol. It never sees a
// seed between two survivors, so one survivor's masked update is indistinguishable from random
// to it. A dropped client's update must never be accepted after its seeds were revealed (the
// aggregator closes the round's intake first); Bonawitz's self mask, which protects against an
// aggregator that lies about who dropped, is not built.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"

namespace dais::fed {

// Fixed point: value x (weighted by w) -> round(x * w * scale) mod 2^64; the weight itself is
// appended as the last element, so the sum carries the total weight.
inline constexpr double kFixedScale = 1 << 20;
// Each encoded element is clamped to ±(2^52 - 1) (|weight × value| below 2^32), so that the sum
// of up to 2,048 clients stays inside int64 (2,048 × (2^52 - 1) < 2^63). Clip updates (update.h
// ClipL2) and bound the samples a client may claim (the aggregator cannot check a masked weight).
inline constexpr double kMaxEncoded = 4503599627370495.0;  // 2^52 - 1
inline constexpr int kMaxClients = 2048;

std::vector<uint64_t> Encode(const std::vector<float>& delta, int64_t weight);
// The weighted mean from a sum of encodings; *total_weight: the summed weights.
std::vector<float> DecodeMean(const std::vector<uint64_t>& sum, int64_t* total_weight);
void AddInto(std::vector<uint64_t>* sum, const std::vector<uint64_t>& v);

class KeyPair {
 public:
  static StatusOr<KeyPair> Generate();
  KeyPair(KeyPair&&) noexcept;
  KeyPair& operator=(KeyPair&&) noexcept;
  ~KeyPair();
  const std::string& public_key() const { return public_; }  // 32 bytes
  // The pairwise seed with the holder of `peer_public` for `round` (32 bytes): the same on both
  // sides. InvalidArgument for a key that is not 32 bytes or a degenerate point.
  StatusOr<std::string> PairSeed(const std::string& peer_public, const std::string& round) const;

 private:
  KeyPair() = default;
  struct Key;
  std::unique_ptr<Key> key_;
  std::string public_;
};

// n values of the ChaCha20 stream keyed by `seed`.
std::vector<uint64_t> MaskStream(const std::string& seed, size_t n);

// Client side: `encoded` masked for the roster (client id -> public key; `self` in it).
StatusOr<std::vector<uint64_t>> Mask(std::vector<uint64_t> encoded, const std::string& self,
                                     const KeyPair& keys,
                                     const std::map<std::string, std::string>& roster,
                                     const std::string& round);

// Aggregator side: takes out of `sum` the mask that `survivor` added for `dropped` (given the
// seed the survivor revealed).
void RemoveDangling(std::vector<uint64_t>* sum, const std::string& survivor,
                    const std::string& dropped, const std::string& seed);

}  // namespace dais::fed
