// The feature store's read and write path: L1 (in-process cache) in front of an online tier
// (Redis, or the in-process memory tier in standalone mode).
//
// Lookup of (rows × feature groups):
//   1. L1: a record younger than --feature-l1-ttl is served from memory;
//   2. misses are single-flighted per record key (concurrent lookups of one key make one tier
//      read) and sent to the tier in ONE batch (the Redis tier pipelines it per shard);
//   3. the tier's answer fills L1 (not-found answers too, briefly: negative caching);
//   4. if the tier fails or the lookup's deadline passes, a record still in L1 and still within
//      its max age is used; otherwise the feature's declared default, with status DEFAULTED.
// Each (row, group) comes back with a status — PRESENT, STALE (older than max age; its value is
// reported but enrichment uses the default), NOT_FOUND (default), DEFAULTED (tier unavailable) —
// and its event time.
//
// Thread-safe. Lookup's callback runs exactly once: on the caller's thread when L1 answers
// everything, otherwise on the tier's thread (Redis I/O thread); it must not block.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "features/cache/hashed_key.h"
#include "features/cache/heavy_hitters.h"
#include "features/cache/l1_cache.h"
#include "features/cache/single_flight.h"
#include "features/spec/feature_spec.h"
#include "features/store/online_tier.h"

namespace dais::features {

enum class FeatureStatus { kPresent, kStale, kNotFound, kDefaulted };
std::string_view FeatureStatusName(FeatureStatus status);  // "PRESENT", "STALE", ...

struct StoreOptions {
  L1Options l1;
  std::chrono::microseconds l1_ttl{2'000'000};      // re-read the tier after this
  std::chrono::microseconds negative_ttl{500'000};  // remember "not found" this long
  std::chrono::milliseconds lookup_timeout{50};     // deadline of a lookup's tier read
  std::chrono::milliseconds push_timeout{1000};     // deadline of a push's tier write
  size_t access_capacity = 100'000;                 // heavy-hitters sketch size (0: off)
};

struct LookupRequest {
  FeatureSpecPtr spec;
  // Entity id columns by entity name (canonical ids, CanonicalEntityId); all the same length.
  std::map<std::string, std::vector<std::string>> entities;
  std::vector<size_t> groups;  // indices into spec->groups; each group's entity must be present
  std::chrono::steady_clock::time_point deadline{};  // default: now + lookup_timeout
};

struct LookupResult {
  FeatureSpecPtr spec;
  std::vector<size_t> groups;
  size_t rows = 0;
  // Indexed [row * groups.size() + g]; a record is null when DEFAULTED.
  std::vector<RecordPtr> records;
  std::vector<FeatureStatus> statuses;

  size_t Index(size_t row, size_t g) const { return row * groups.size() + g; }
  // The bytes of feature `f` of group slot `g` for `row`: the stored value when PRESENT (or
  // STALE and `stale_ok`), the declared default otherwise.
  std::string_view Value(size_t row, size_t g, size_t f, bool stale_ok) const;
  int64_t EventTimeUs(size_t row, size_t g) const;
};

struct PushRow {
  size_t group = 0;  // index into spec->groups
  std::string entity_id;
  int64_t event_time_us = 0;
  std::string payload;  // record_bytes
};

class FeatureStore {
 public:
  FeatureStore(StoreOptions options, std::unique_ptr<OnlineTier> tier);
  ~FeatureStore();

  void Lookup(LookupRequest request, std::function<void(LookupResult)> done);
  LookupResult LookupSync(LookupRequest request);  // not on the tier's thread

  // Writes rows (older event times than stored are not applied: result false) and drops the
  // rows' keys from this process's L1. Other processes' L1 copies age out within l1_ttl.
  // When the tier is not reachable every row fails at once with Unavailable; a tier that does
  // not answer fails the rows at push_timeout.
  void Push(FeatureSpecPtr spec, std::vector<PushRow> rows,
            std::function<void(std::vector<StatusOr<bool>>)> done);
  std::vector<StatusOr<bool>> PushSync(FeatureSpecPtr spec, std::vector<PushRow> rows);

  // Drops `keys` (record keys) from this process's L1, as a push through this process does, and
  // keeps reads already in flight from putting an older answer back. For writes made by other
  // processes (features/store/invalidation.h).
  void Invalidate(const std::vector<std::string_view>& keys);
  // Drops the whole L1 the same way (invalidation messages may have been missed).
  void InvalidateAll();

  bool Healthy() const { return tier_->Healthy(); }
  OnlineTier* tier() { return tier_.get(); }
  L1Cache& l1() { return l1_; }
  // Per-entity access counts ("<domain>:<entity>=<id>"), for pre-warm. Null when off.
  HeavyHitters* access() { return access_.get(); }
  const StoreOptions& options() const { return options_; }

 private:
  struct Pending;
  struct UniqueKeys;
  struct LedReads;
  // Lookup, step by step: the entity column of each group slot (and the row count), the unique
  // record keys (and which result slots each fills), the L1 probe (hits resolved at once, misses
  // led or followed through single-flight), the tier read of the keys this lookup leads.
  static std::vector<const std::vector<std::string>*> EntityColumns(const LookupRequest& req,
                                                                    LookupResult* result);
  static UniqueKeys Dedupe(Pending* p, const std::vector<const std::vector<std::string>*>& columns);
  LedReads ProbeL1(const std::shared_ptr<Pending>& p, UniqueKeys& keys);
  void ReadTier(const std::shared_ptr<Pending>& p, LedReads led,
                std::chrono::steady_clock::time_point deadline);
  void Resolve(const std::shared_ptr<Pending>& p, size_t slot, const StatusOr<RecordPtr>& r,
               const RecordPtr& fallback);
  void Finish(const std::shared_ptr<Pending>& p);
  // Sets the record's refresh time, puts it into L1 and returns it (shared, now immutable).
  // `cached`: the L1 entry past its refresh time, if any.
  RecordPtr FillL1(HashedKey key, const GroupSpec& group, TierRecordPtr record,
                   uint64_t epoch_at_read, const RecordPtr& cached);
  // Write epoch of a key's bucket: a push bumps it, so a read issued before the push does not
  // put its (older) answer into L1 after the push dropped the key.
  std::atomic<uint64_t>& Epoch(uint64_t key_hash) { return epochs_[key_hash % epochs_.size()]; }
  void CountTierError(const Status& status, const std::string& key);
  void CountAccess(const FeatureSpec& spec,
                   const std::map<std::string, std::vector<std::string>>& entities);
  static constexpr uint64_t kAccessSample = 8;

  const StoreOptions options_;
  std::unique_ptr<OnlineTier> tier_;
  L1Cache l1_;
  SingleFlight<StatusOr<RecordPtr>> flights_;
  std::unique_ptr<HeavyHitters> access_;
  std::array<std::atomic<uint64_t>, 256> epochs_{};
  std::atomic<bool> access_sampled_{false};
};

// Current wall-clock time in unix microseconds (event times are wall-clock).
int64_t UnixNowUs();

}  // namespace dais::features
