// A record key with its hash computed once: the feature store hashes each key of a lookup one
// time and hands the hash to L1, the single-flight table and the write epochs, instead of each
// hashing the ~40-byte key again (seven times per record before).
//
// KeyHash/KeyEq make std::unordered_{map,set}<std::string, ...> findable by HashedKey without
// hashing (heterogeneous lookup); the hash is std::hash<std::string_view>, the one HashOf
// computes, so a key inserted as a std::string lands in the same bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dais::features {

inline uint64_t HashOf(std::string_view s) { return std::hash<std::string_view>{}(s); }

struct HashedKey {
  std::string_view key;
  size_t hash;
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(const std::string& s) const { return HashOf(s); }
  size_t operator()(const HashedKey& k) const { return k.hash; }
};

struct KeyEq {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const HashedKey& a, const std::string& b) const { return a.key == b; }
  bool operator()(const std::string& a, const HashedKey& b) const { return a == b.key; }
  bool operator()(const HashedKey& a, const HashedKey& b) const { return a.key == b.key; }
};

}  // namespace dais::features
