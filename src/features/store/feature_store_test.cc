// FeatureStore over the memory tier and a scripted tier (our own seam: counts reads, answers
// later or fails), checking statuses, single-flight, negative caching and fallbacks.
#include "features/store/feature_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "common/mutex.h"
#include "common/status_testing.h"
#include "features/store/memory_tier.h"

namespace dais::features {
namespace {

constexpr const char* kSpec = R"(
domain: t
entities: [{name: user_id, key_type: int64}]
feature_groups:
  - name: g
    entity: user_id
    max_age: 1h
    features:
      - {name: a, dtype: FP32, default: 7}
      - {name: b, dtype: INT64, shape: [2], default: [1, 2]}
)";

FeatureSpecPtr Spec() {
  auto s = ParseFeatureSpec(kSpec, "test.yaml");
  EXPECT_OK(s);
  return *s;
}

std::string Payload(float a, int64_t b0, int64_t b1) {
  std::string p(20, '\0');
  std::memcpy(p.data(), &a, 4);
  std::memcpy(p.data() + 4, &b0, 8);
  std::memcpy(p.data() + 12, &b1, 8);
  return p;
}

float A(const LookupResult& r, size_t row) {
  float a;
  std::memcpy(&a, r.Value(row, 0, 0, false).data(), 4);
  return a;
}

LookupRequest Request(const FeatureSpecPtr& spec, std::vector<std::string> ids) {
  LookupRequest req;
  req.spec = spec;
  req.entities["user_id"] = std::move(ids);
  req.groups = {0};
  return req;
}

// A tier that records reads and answers them when told (or at once).
class ScriptedTier : public OnlineTier {
 public:
  void Read(std::vector<TierRead> reads, Deadline, ReadCallback cb) override {
    MutexLock l(&mu_);
    ++reads_;
    keys_ += reads.size();
    if (hold_) {
      held_.push_back({std::move(reads), std::move(cb)});
      return;
    }
    Answer(reads, cb);
  }
  void Write(std::vector<TierWrite> writes, Deadline, WriteCallback cb) override {
    std::vector<StatusOr<bool>> out;
    {
      MutexLock l(&mu_);
      for (auto& w : writes) {
        data_[w.key] = CachedRecord{true, w.event_time_us, w.payload};
        out.emplace_back(true);
      }
    }
    cb(std::move(out));
  }
  bool Healthy() const override { return !fail_; }
  const char* name() const override { return "scripted"; }

  void Answer(const std::vector<TierRead>& reads, const ReadCallback& cb) {
    std::vector<StatusOr<TierRecordPtr>> out;
    for (const auto& r : reads) {
      if (fail_) {
        out.emplace_back(Unavailable("down"));
        continue;
      }
      auto rec = std::make_shared<CachedRecord>();
      auto it = data_.find(r.key);
      if (it != data_.end()) *rec = it->second;
      out.emplace_back(rec);
    }
    cb(reads, std::move(out));
  }
  void Release() {
    std::vector<std::pair<std::vector<TierRead>, ReadCallback>> held;
    {
      MutexLock l(&mu_);
      held.swap(held_);
    }
    for (auto& [reads, cb] : held) Answer(reads, cb);
  }

  Mutex mu_;
  int reads_ = 0;
  size_t keys_ = 0;
  bool hold_ = false;
  bool fail_ = false;
  std::map<std::string, CachedRecord> data_;
  std::vector<std::pair<std::vector<TierRead>, ReadCallback>> held_;
};

TEST(FeatureStore, StatusesAndValuesOverTheMemoryTier) {
  auto spec = Spec();
  FeatureStore store(StoreOptions{}, std::make_unique<MemoryTier>(1 << 20));
  int64_t now = UnixNowUs();
  std::vector<PushRow> rows = {{0, "1", now, Payload(1.5f, 3, 4)},
                               {0, "2", now - int64_t{7200} * 1000000, Payload(2.5f, 5, 6)}};
  auto w = store.PushSync(spec, rows);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(*w[0] && *w[1]);
  // An older write does not replace a newer one.
  auto older = store.PushSync(spec, {{0, "1", now - 1, Payload(9.f, 9, 9)}});
  EXPECT_FALSE(*older[0]);

  auto r = store.LookupSync(Request(spec, {"1", "2", "3", "1"}));
  ASSERT_EQ(r.rows, 4u);
  EXPECT_EQ(r.statuses[0], FeatureStatus::kPresent);
  EXPECT_EQ(A(r, 0), 1.5f);
  EXPECT_EQ(r.statuses[1], FeatureStatus::kStale);
  EXPECT_EQ(A(r, 1), 7.f) << "a stale value is not used as fresh";
  float stale;
  std::memcpy(&stale, r.Value(1, 0, 0, /*stale_ok=*/true).data(), 4);
  EXPECT_EQ(stale, 2.5f);
  EXPECT_EQ(r.statuses[2], FeatureStatus::kNotFound);
  EXPECT_EQ(A(r, 2), 7.f);
  EXPECT_EQ(r.statuses[3], FeatureStatus::kPresent);
  EXPECT_EQ(r.EventTimeUs(0, 0), now);
}

TEST(FeatureStore, ConcurrentMissesOfOneKeyMakeOneTierRead) {
  auto spec = Spec();
  auto tier = std::make_unique<ScriptedTier>();
  ScriptedTier* t = tier.get();
  t->hold_ = true;
  t->data_[RecordKey(*spec, spec->groups[0], "1")] =
      CachedRecord{true, UnixNowUs(), Payload(4.f, 0, 0)};
  FeatureStore store(StoreOptions{}, std::move(tier));
  std::atomic<int> done{0};
  std::vector<LookupResult> results(8);
  for (int i = 0; i < 8; ++i) {
    store.Lookup(Request(spec, {"1"}), [&, i](LookupResult r) {
      results[static_cast<size_t>(i)] = std::move(r);
      done++;
    });
  }
  EXPECT_EQ(t->reads_, 1);
  EXPECT_EQ(done.load(), 0);
  t->Release();
  ASSERT_EQ(done.load(), 8);
  for (const auto& r : results) EXPECT_EQ(A(r, 0), 4.f);
  // Now in L1: no further read.
  store.LookupSync(Request(spec, {"1"}));
  EXPECT_EQ(t->reads_, 1);
}

TEST(FeatureStore, NotFoundIsCachedBriefly) {
  auto spec = Spec();
  auto tier = std::make_unique<ScriptedTier>();
  ScriptedTier* t = tier.get();
  StoreOptions o;
  o.negative_ttl = std::chrono::milliseconds(50);
  FeatureStore store(o, std::move(tier));
  EXPECT_EQ(store.LookupSync(Request(spec, {"5"})).statuses[0], FeatureStatus::kNotFound);
  EXPECT_EQ(store.LookupSync(Request(spec, {"5"})).statuses[0], FeatureStatus::kNotFound);
  EXPECT_EQ(t->reads_, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  store.LookupSync(Request(spec, {"5"}));
  EXPECT_EQ(t->reads_, 2);
}

TEST(FeatureStore, TierFailureFallsBackToL1ThenDefaults) {
  auto spec = Spec();
  auto tier = std::make_unique<ScriptedTier>();
  ScriptedTier* t = tier.get();
  t->data_[RecordKey(*spec, spec->groups[0], "1")] =
      CachedRecord{true, UnixNowUs(), Payload(4.f, 0, 0)};
  StoreOptions o;
  o.l1_ttl = std::chrono::microseconds(0);  // every lookup goes to the tier
  FeatureStore store(o, std::move(tier));
  EXPECT_EQ(A(store.LookupSync(Request(spec, {"1"})), 0), 4.f);
  t->fail_ = true;
  auto r = store.LookupSync(Request(spec, {"1", "2"}));
  EXPECT_EQ(t->reads_, 2);
  EXPECT_EQ(r.statuses[0], FeatureStatus::kPresent) << "L1 copy within max age";
  EXPECT_EQ(A(r, 0), 4.f);
  EXPECT_EQ(r.statuses[1], FeatureStatus::kDefaulted);
  EXPECT_EQ(A(r, 1), 7.f);
}

TEST(FeatureStore, DuplicateKeysInOneLookupAreReadOnce) {
  auto spec = Spec();
  auto tier = std::make_unique<ScriptedTier>();
  ScriptedTier* t = tier.get();
  FeatureStore store(StoreOptions{}, std::move(tier));
  auto r = store.LookupSync(Request(spec, {"1", "1", "2", "1"}));
  EXPECT_EQ(r.rows, 4u);
  EXPECT_EQ(t->keys_, 2u);
}

TEST(FeatureStore, AReadIssuedBeforeAPushDoesNotRefillL1WithTheOlderValue) {
  auto spec = Spec();
  auto tier = std::make_unique<ScriptedTier>();
  ScriptedTier* t = tier.get();
  const std::string key = RecordKey(*spec, spec->groups[0], "1");
  t->data_[key] = CachedRecord{true, UnixNowUs() - 10, Payload(1.f, 0, 0)};
  FeatureStore store(StoreOptions{}, std::move(tier));
  t->hold_ = true;  // the read is in flight ...
  std::atomic<bool> done{false};
  store.Lookup(Request(spec, {"1"}), [&](LookupResult) { done = true; });
  // ... when a newer value is pushed (written, and dropped from L1).
  auto w = store.PushSync(spec, {{0, "1", UnixNowUs(), Payload(2.f, 0, 0)}});
  ASSERT_OK(w[0]);
  t->hold_ = false;
  t->Release();  // the old answer arrives after the push
  ASSERT_TRUE(done.load());
  // The next lookup must not be served the pre-push value from L1.
  EXPECT_EQ(A(store.LookupSync(Request(spec, {"1"})), 0), 2.f);
  EXPECT_EQ(t->reads_, 2) << "the pre-push answer was not cached";
}

TEST(FeatureStore, MemoryTierStorageTtlAndBound) {
  auto spec = ParseFeatureSpec(R"(
entities: [{name: e}]
feature_groups:
  - {name: g, entity: e, ttl: 50ms, ttl_jitter: 0, features: [{name: x, dtype: INT8}]}
)",
                               "t.yaml");
  ASSERT_OK(spec);
  MemoryTier tier(1000);
  std::vector<StatusOr<bool>> res;
  std::vector<TierWrite> w;
  for (int i = 0; i < 20; ++i) {
    w.push_back({"k" + std::to_string(i), &(*spec)->groups[0], 1, std::string(1, 'x')});
  }
  tier.Write(std::move(w), {}, [&](std::vector<StatusOr<bool>> r) { res = std::move(r); });
  int stored = 0, full = 0;
  for (const auto& r : res) {
    if (r.ok()) stored++;
    if (!r.ok() && r.status().code() == StatusCode::kResourceExhausted) full++;
  }
  EXPECT_GT(stored, 0);
  EXPECT_GT(full, 0) << "the byte bound rejects writes";
  EXPECT_LE(tier.bytes(), 1000u);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  std::vector<StatusOr<TierRecordPtr>> got;
  tier.Read({{"k0", &(*spec)->groups[0]}}, {}, [&](auto, auto r) { got = std::move(r); });
  ASSERT_OK(got[0]);
  EXPECT_FALSE((*got[0])->found) << "expired by the storage TTL";
}

}  // namespace
}  // namespace dais::features
