#include "gateway/jwt_cache.h"

#include <limits>

namespace dais::gateway {

JwtCache::JwtCache(size_t capacity)
    : per_shard_(capacity == 0 ? 0 : (capacity + kShards - 1) / kShards), shards_(kShards) {}

JwtCache::Shard& JwtCache::ShardOf(std::string_view token) {
  return shards_[Hash{}(token) % kShards];
}

size_t JwtCache::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    MutexLock l(&s.mu);
    n += s.lru.size();
  }
  return n;
}

std::shared_ptr<const JwtClaims> JwtCache::Find(Shard& s, std::string_view token,
                                                const std::shared_ptr<const Jwks>& keys,
                                                int64_t now_s) {
  MutexLock l(&s.mu);
  auto it = s.index.find(token);
  if (it == s.index.end()) return nullptr;
  const auto entry = it->second;
  if (entry->keys != keys || now_s < entry->from_s || now_s >= entry->until_s) {
    s.index.erase(it);  // the key is a view of the entry's token: the index goes first
    s.lru.erase(entry);
    return nullptr;
  }
  s.lru.splice(s.lru.begin(), s.lru, entry);
  return entry->claims;
}

void JwtCache::Insert(Shard& s, std::string_view token, const std::shared_ptr<const Jwks>& keys,
                      std::shared_ptr<const JwtClaims> claims, int64_t from_s, int64_t until_s) {
  MutexLock l(&s.mu);
  if (s.index.count(token)) return;  // another thread verified it meanwhile
  while (s.lru.size() >= per_shard_) {
    s.index.erase(s.lru.back().token);
    s.lru.pop_back();
  }
  s.lru.push_front({std::string(token), keys, std::move(claims), from_s, until_s});
  s.index.emplace(s.lru.front().token, s.lru.begin());
}

CachedJwt JwtCache::Verify(std::string_view token, const std::shared_ptr<const Jwks>& keys,
                           const JwtPolicy& policy, std::chrono::system_clock::time_point now) {
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  Shard* shard = per_shard_ > 0 ? &ShardOf(token) : nullptr;
  if (shard != nullptr) {
    if (auto claims = Find(*shard, token, keys, now_s)) return {std::move(claims), "", "", true};
  }
  JwtResult v = VerifyJwt(token, *keys, policy, now);
  if (!v.ok) return {nullptr, std::move(v.reason), std::move(v.message), false};
  // exp is kept in whole seconds (fractions dropped), so the window ends at most a second
  // before VerifyJwt's would; past it, VerifyJwt decides again.
  const int64_t until = v.claims.expires_at != 0 || policy.require_exp
                            ? v.claims.expires_at + policy.clock_skew.count()
                            : std::numeric_limits<int64_t>::max();
  auto claims = std::make_shared<const JwtClaims>(std::move(v.claims));
  if (shard != nullptr && now_s < until) Insert(*shard, token, keys, claims, now_s, until);
  return {std::move(claims), "", "", false};
}

}  // namespace dais::gateway
