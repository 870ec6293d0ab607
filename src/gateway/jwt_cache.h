// Verified bearer tokens remembered until they expire (docs/gateway.md, "Authentication"): a
// client that reuses its token pays the signature check once, not per request.
//
// Keyed by the whole token (not a hash of it: a collision must never let another token in). An
// entry is used only
//   - with the key set it was verified with (after a JWKS reload every token is verified anew,
//     so a removed key stops working at once), and
//   - while the clock is inside the window where VerifyJwt accepted it: from the moment it was
//     verified (a clock stepped back verifies anew) to exp + skew (a token without exp, where
//     the policy allows that, until the keys change or it is evicted).
// Refusals are not remembered (a wrong token costs a verification each time, as without the
// cache). Bounded: at most `capacity` tokens, least recently used out first, in shards with a
// lock each so that the gateway's threads rarely meet.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "gateway/jwt.h"

namespace dais::gateway {

struct CachedJwt {
  std::shared_ptr<const JwtClaims> claims;  // null: refused
  std::string reason, message;              // when refused: VerifyJwt's
  bool hit = false;                         // answered from the cache
};

class JwtCache {
 public:
  // capacity 0: nothing is remembered (every call verifies).
  explicit JwtCache(size_t capacity);
  JwtCache(const JwtCache&) = delete;
  JwtCache& operator=(const JwtCache&) = delete;

  // VerifyJwt(token, *keys, policy, now), remembered. `policy` must be the same on every call
  // (the gateway's; it is not part of the key).
  CachedJwt Verify(std::string_view token, const std::shared_ptr<const Jwks>& keys,
                   const JwtPolicy& policy, std::chrono::system_clock::time_point now);

  size_t size() const;

 private:
  struct Entry {
    std::string token;
    std::shared_ptr<const Jwks> keys;  // held: a freed set's address cannot be mistaken for it
    std::shared_ptr<const JwtClaims> claims;
    int64_t from_s = 0, until_s = 0;  // the window, in seconds since the epoch: [from, until)
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable Mutex mu;
    std::list<Entry> lru DAIS_GUARDED_BY(mu);  // most recent first
    std::unordered_map<std::string_view, std::list<Entry>::iterator, Hash, std::equal_to<>> index
        DAIS_GUARDED_BY(mu);  // views into lru's tokens
  };
  static constexpr size_t kShards = 16;

  Shard& ShardOf(std::string_view token);
  std::shared_ptr<const JwtClaims> Find(Shard& s, std::string_view token,
                                        const std::shared_ptr<const Jwks>& keys, int64_t now_s);
  void Insert(Shard& s, std::string_view token, const std::shared_ptr<const Jwks>& keys,
              std::shared_ptr<const JwtClaims> claims, int64_t from_s, int64_t until_s);

  const size_t per_shard_;
  std::vector<Shard> shards_;
};

}  // namespace dais::gateway
