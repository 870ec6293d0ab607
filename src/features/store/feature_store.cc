#include "features/store/feature_store.h"

#include <array>
#include <future>
#include <unordered_map>

#include "common/logging.h"
#include "common/mutex.h"
#include "dais/clock.h"
#include "metrics/registry.h"

namespace dais::features {

namespace {

constexpr int kStatuses = 4;
constexpr const char* kStatusLabels[kStatuses] = {"present", "stale", "not_found", "defaulted"};

// Metric handles resolved once: a lookup touches no registry lock and builds no label vectors.
struct StoreMetrics {
  metrics::Family<metrics::Counter>& values;
  metrics::Counter& l1_hit;
  metrics::Counter& l1_miss;
  metrics::Family<metrics::Counter>& tier_errors;
  metrics::Family<metrics::Counter>& fallbacks;
  metrics::Family<metrics::Histogram>& latency;
  metrics::Histogram& latency_l1;
  metrics::Gauge& l1_bytes;
  metrics::Gauge& l1_entries;
  metrics::Counter& l1_evictions;
  std::atomic<uint64_t> evictions_seen{0};
  std::atomic<uint64_t> gauges_at_ns{0};

  static StoreMetrics& Get() {
    auto& r = metrics::Registry::Global();
    static StoreMetrics m = [&r]() -> StoreMetrics {
      auto& l1 = r.AddCounter("dais_feature_l1_requests_total",
                              "L1 (in-process) cache lookups by result (hit, miss)", {"result"});
      auto& latency = r.AddHistogram(
          "dais_feature_lookup_duration_seconds",
          "Feature lookup latency, by the deepest tier it needed (l1, redis, memory)", {"tier"},
          {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05,
           0.1, 0.2, 0.5, 1});
      return StoreMetrics{
          r.AddCounter("dais_feature_values_total",
                       "Feature records returned, by group and status (present, stale, "
                       "not_found, defaulted)",
                       {"domain", "group", "status"}),
          l1.Get({"hit"}),
          l1.Get({"miss"}),
          r.AddCounter("dais_feature_tier_errors_total",
                       "Online tier reads that failed (unavailable, deadline, bad record)",
                       {"tier", "code"}),
          r.AddCounter("dais_feature_fallbacks_total",
                       "Records served from L1 past their refresh time because the tier failed",
                       {"tier"}),
          latency,
          latency.Get({"l1"}),
          r.AddGauge("dais_feature_l1_bytes", "Bytes charged to the L1 feature cache", {}).Get({}),
          r.AddGauge("dais_feature_l1_entries", "Entries in the L1 feature cache", {}).Get({}),
          r.AddCounter("dais_feature_l1_evictions_total", "Entries evicted from the L1 cache", {})
              .Get({}),
      };
    }();
    return m;
  }

  // The four status counters of a group, cached per thread by the group's address (and checked
  // by name, so a spec freed and another allocated at the same address is not confused).
  std::array<metrics::Counter*, kStatuses>& ValueCounters(const std::string& domain,
                                                          const GroupSpec& g) {
    struct Entry {
      std::string domain, group;
      std::array<metrics::Counter*, kStatuses> counters;
    };
    thread_local std::unordered_map<const GroupSpec*, Entry> cache;
    Entry& e = cache[&g];
    if (e.group != g.name || e.domain != domain || e.counters[0] == nullptr) {
      e.domain = domain;
      e.group = g.name;
      for (int s = 0; s < kStatuses; ++s)
        e.counters[s] = &values.Get({domain, g.name, kStatusLabels[s]});
    }
    return e.counters;
  }
};

bool Fresh(const CachedRecord& r, const GroupSpec& g, int64_t now_us) {
  return g.max_age_us == 0 || now_us - r.event_time_us <= g.max_age_us;
}

}  // namespace

int64_t UnixNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view FeatureStatusName(FeatureStatus s) {
  switch (s) {
    case FeatureStatus::kPresent:
      return "PRESENT";
    case FeatureStatus::kStale:
      return "STALE";
    case FeatureStatus::kNotFound:
      return "NOT_FOUND";
    case FeatureStatus::kDefaulted:
      return "DEFAULTED";
  }
  return "?";
}

std::string_view LookupResult::Value(size_t row, size_t g, size_t f, bool stale_ok) const {
  const GroupSpec& group = spec->groups[groups[g]];
  size_t i = Index(row, g);
  const RecordPtr& r = records[i];
  bool use = r && r->found &&
             (statuses[i] == FeatureStatus::kPresent ||
              (stale_ok && statuses[i] == FeatureStatus::kStale)) &&
             r->payload.size() == group.record_bytes;
  if (!use) return group.features[f].default_bytes;
  return std::string_view(r->payload).substr(group.offsets[f], group.features[f].byte_size);
}

int64_t LookupResult::EventTimeUs(size_t row, size_t g) const {
  const RecordPtr& r = records[Index(row, g)];
  return r && r->found ? r->event_time_us : 0;
}

struct FeatureStore::Pending {
  LookupResult result;
  // Result indices of unique key k: slot_list[slot_begin[k] .. slot_begin[k + 1]).
  std::vector<uint32_t> slot_begin;
  std::vector<uint32_t> slot_list;
  std::vector<const GroupSpec*> key_group;
  std::atomic<size_t> remaining{0};
  std::function<void(LookupResult)> done;
  uint64_t start_ns = 0;
  int64_t now_us = 0;
  bool used_tier = false;
};

FeatureStore::FeatureStore(StoreOptions options, std::unique_ptr<OnlineTier> tier)
    : options_(options), tier_(std::move(tier)), l1_(options.l1) {
  if (options_.access_capacity > 0) {
    access_ = std::make_unique<HeavyHitters>(options_.access_capacity);
  }
  StoreMetrics::Get();
}

FeatureStore::~FeatureStore() = default;

// The unique record keys of one lookup, each with its hash (computed once for L1, flights and
// epochs).
struct FeatureStore::UniqueKeys {
  std::vector<std::string> keys;
  std::vector<uint64_t> hashes;
};

// The keys a lookup reads from the tier itself (it leads their single-flight), in parallel.
struct FeatureStore::LedReads {
  std::vector<TierRead> reads;
  std::vector<uint32_t> key;        // index into UniqueKeys
  std::vector<RecordPtr> fallback;  // their L1 copies past refresh time, if any
  std::vector<uint64_t> epoch;      // their write epochs when the read was issued
  std::vector<uint64_t> hash;       // their HashOf
};

std::vector<const std::vector<std::string>*> FeatureStore::EntityColumns(const LookupRequest& req,
                                                                         LookupResult* res) {
  const FeatureSpec& spec = *req.spec;
  // Row count: every entity column the groups need has the same length (the caller checks).
  std::vector<const std::vector<std::string>*> columns;  // per group slot
  res->rows = 0;
  for (size_t g : req.groups) {
    auto it = req.entities.find(spec.groups[g].entity);
    if (it == req.entities.end()) {
      DAIS_BUG("feature lookup without the entity column {}", spec.groups[g].entity);
      res->groups.clear();
      columns.clear();
      break;
    }
    columns.push_back(&it->second);
    res->rows = std::max(res->rows, it->second.size());
  }
  return columns;
}

FeatureStore::UniqueKeys FeatureStore::Dedupe(
    Pending* p, const std::vector<const std::vector<std::string>*>& columns) {
  const LookupResult& res = p->result;
  const FeatureSpec& spec = *res.spec;
  const size_t n = res.rows * res.groups.size();
  UniqueKeys u;
  u.keys.reserve(n);  // `unique` holds views into the strings: they must never move
  u.hashes.reserve(n);
  // key_of[i] is the key of result slot i (ragged columns: none, the slot stays DEFAULTED).
  std::vector<uint32_t> key_of(n, UINT32_MAX);
  std::unordered_map<HashedKey, uint32_t, KeyHash, KeyEq> unique;
  const bool small = n <= 8;  // a linear scan beats hashing for a handful of keys
  for (size_t row = 0; row < res.rows; ++row) {
    for (size_t g = 0; g < res.groups.size(); ++g) {
      if (row >= columns[g]->size()) continue;
      const GroupSpec& group = spec.groups[res.groups[g]];
      std::string key = RecordKey(spec, group, (*columns[g])[row]);
      const uint64_t hash = HashOf(key);
      uint32_t k = UINT32_MAX;
      if (small) {
        for (uint32_t j = 0; j < u.keys.size(); ++j) {
          if (u.hashes[j] == hash && u.keys[j] == key) k = j;
        }
      } else if (auto it = unique.find(HashedKey{key, hash}); it != unique.end()) {
        k = it->second;
      }
      if (k == UINT32_MAX) {
        k = static_cast<uint32_t>(u.keys.size());
        u.keys.push_back(std::move(key));
        u.hashes.push_back(hash);
        p->key_group.push_back(&group);
        if (!small) unique.emplace(HashedKey{u.keys.back(), hash}, k);
      }
      key_of[res.Index(row, g)] = k;
    }
  }
  // Result slots per key: slot_list[slot_begin[k] .. slot_begin[k + 1]).
  p->slot_begin.assign(u.keys.size() + 1, 0);
  for (uint32_t k : key_of) {
    if (k != UINT32_MAX) ++p->slot_begin[k + 1];
  }
  for (size_t k = 0; k < u.keys.size(); ++k) p->slot_begin[k + 1] += p->slot_begin[k];
  p->slot_list.resize(p->slot_begin.back());
  std::vector<uint32_t> fill(p->slot_begin.begin(), p->slot_begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    if (key_of[i] != UINT32_MAX) p->slot_list[fill[key_of[i]]++] = static_cast<uint32_t>(i);
  }
  return u;
}

FeatureStore::LedReads FeatureStore::ProbeL1(const std::shared_ptr<Pending>& p, UniqueKeys& u) {
  LedReads led;
  const uint64_t now_ns = p->start_ns;
  uint64_t hits = 0, misses = 0;
  for (size_t k = 0; k < u.keys.size(); ++k) {
    RecordPtr rec = l1_.Get(u.keys[k], u.hashes[k], now_ns);
    if (rec && now_ns < rec->refresh_after.load()) {
      ++hits;
      Resolve(p, k, rec, nullptr);
      continue;
    }
    ++misses;
    bool leader = flights_.Lead(HashedKey{u.keys[k], u.hashes[k]}, [&] {
      return [this, p, k, fallback = rec](const StatusOr<RecordPtr>& r) {
        Resolve(p, k, r, fallback);
      };
    });
    if (leader) {
      led.reads.push_back(TierRead{std::move(u.keys[k]), p->key_group[k]});
      led.key.push_back(static_cast<uint32_t>(k));
      led.fallback.push_back(std::move(rec));
      led.epoch.push_back(Epoch(u.hashes[k]).load(std::memory_order_acquire));
      led.hash.push_back(u.hashes[k]);
    }
  }
  StoreMetrics& m = StoreMetrics::Get();
  if (hits) m.l1_hit.Increment(static_cast<double>(hits));
  if (misses) {
    m.l1_miss.Increment(static_cast<double>(misses));
    p->used_tier = true;
  }
  return led;
}

void FeatureStore::ReadTier(const std::shared_ptr<Pending>& p, LedReads led,
                            std::chrono::steady_clock::time_point deadline) {
  std::vector<TierRead> reads = std::move(led.reads);
  tier_->Read(std::move(reads), deadline,
              [this, p, led = std::move(led)](std::vector<TierRead> reads,
                                              std::vector<StatusOr<TierRecordPtr>> results) {
                for (size_t i = 0; i < reads.size(); ++i) {
                  const HashedKey key{reads[i].key, led.hash[i]};
                  if (!results[i].ok()) CountTierError(results[i].status(), reads[i].key);
                  StatusOr<RecordPtr> r =
                      results[i].ok() ? StatusOr<RecordPtr>(FillL1(key, *reads[i].group,
                                                                   std::move(results[i]).value(),
                                                                   led.epoch[i], led.fallback[i]))
                                      : StatusOr<RecordPtr>(results[i].status());
                  flights_.Complete(key, r);  // followers from other lookups
                  Resolve(p, led.key[i], r, led.fallback[i]);
                }
              });
}

void FeatureStore::Lookup(LookupRequest req, std::function<void(LookupResult)> done) {
  auto p = std::make_shared<Pending>();
  p->start_ns = NowNs();
  p->now_us = UnixNowUs();
  p->done = std::move(done);
  LookupResult& res = p->result;
  res.spec = req.spec;
  res.groups = req.groups;
  const std::vector<const std::vector<std::string>*> columns = EntityColumns(req, &res);
  const size_t n = res.rows * res.groups.size();
  res.records.assign(n, nullptr);
  res.statuses.assign(n, FeatureStatus::kDefaulted);
  if (access_) CountAccess(*req.spec, req.entities);
  UniqueKeys keys = Dedupe(p.get(), columns);
  p->remaining = keys.keys.size() + 1;
  LedReads led = ProbeL1(p, keys);
  if (!led.reads.empty()) {
    auto deadline = req.deadline == std::chrono::steady_clock::time_point{}
                        ? std::chrono::steady_clock::now() + options_.lookup_timeout
                        : req.deadline;
    ReadTier(p, std::move(led), deadline);
  }
  if (p->remaining.fetch_sub(1) == 1) Finish(p);
}

void FeatureStore::CountAccess(const FeatureSpec& spec,
                               const std::map<std::string, std::vector<std::string>>& entities) {
  // Exact while the sketch has room; once it is nearly full (many distinct entities, where every
  // new key costs a Space-Saving replacement) one access in kAccessSample is counted with weight
  // kAccessSample: the top entities of a skewed day stay the top entities.
  thread_local std::string name;
  thread_local uint64_t rng = 0x9e3779b97f4a7c15ull ^ reinterpret_cast<uintptr_t>(&name);
  thread_local int64_t until_check = 0;  // ids until this thread looks at the fill again
  if (until_check <= 0) {
    until_check = 16384;
    access_sampled_.store(access_->size() * 10 >= access_->capacity() * 9,
                          std::memory_order_relaxed);
  }
  for (const auto& [entity, ids] : entities) until_check -= static_cast<int64_t>(ids.size());
  const bool sampled = access_sampled_.load(std::memory_order_relaxed);
  for (const auto& [entity, ids] : entities) {
    for (const auto& id : ids) {
      if (sampled) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if (rng % kAccessSample != 0) continue;
      }
      name.assign(spec.domain).append(":").append(entity).append("=").append(id);
      access_->Offer(name, sampled ? kAccessSample : 1);
    }
  }
}

void FeatureStore::CountTierError(const Status& s, const std::string& key) {
  const char* code = s.code() == StatusCode::kDeadlineExceeded ? "deadline_exceeded"
                     : s.code() == StatusCode::kUnavailable    ? "unavailable"
                                                               : "internal";
  StoreMetrics::Get().tier_errors.Get({tier_->name(), code}).Increment();
  LOG_VERBOSE(1, "feature read {}: {}", key, s.message());
}

void FeatureStore::Resolve(const std::shared_ptr<Pending>& p, size_t k,
                           const StatusOr<RecordPtr>& r, const RecordPtr& fallback) {
  const GroupSpec& group = *p->key_group[k];
  RecordPtr rec;
  FeatureStatus status;
  if (r.ok()) {
    rec = *r;
    status = !rec->found                     ? FeatureStatus::kNotFound
             : Fresh(*rec, group, p->now_us) ? FeatureStatus::kPresent
                                             : FeatureStatus::kStale;
  } else if (fallback && fallback->found && Fresh(*fallback, group, p->now_us)) {
    rec = fallback;
    status = FeatureStatus::kPresent;
    StoreMetrics::Get().fallbacks.Get({tier_->name()}).Increment();
  } else {
    status = FeatureStatus::kDefaulted;
  }
  for (uint32_t i = p->slot_begin[k]; i < p->slot_begin[k + 1]; ++i) {
    uint32_t slot = p->slot_list[i];
    p->result.records[slot] = rec;
    p->result.statuses[slot] = status;
  }
  if (p->remaining.fetch_sub(1) == 1) Finish(p);
}

void FeatureStore::Finish(const std::shared_ptr<Pending>& p) {
  StoreMetrics& m = StoreMetrics::Get();
  LookupResult& res = p->result;
  const FeatureSpec& spec = *res.spec;
  for (size_t g = 0; g < res.groups.size(); ++g) {
    uint64_t counts[kStatuses] = {0, 0, 0, 0};
    for (size_t row = 0; row < res.rows; ++row) {
      ++counts[static_cast<int>(res.statuses[res.Index(row, g)])];
    }
    auto& counters = m.ValueCounters(spec.domain, spec.groups[res.groups[g]]);
    for (int s = 0; s < kStatuses; ++s) {
      if (counts[s]) counters[s]->Increment(static_cast<double>(counts[s]));
    }
  }
  uint64_t now = NowNs();
  metrics::Histogram& latency = p->used_tier ? m.latency.Get({tier_->name()}) : m.latency_l1;
  latency.Observe(static_cast<double>(now - p->start_ns) * 1e-9);
  // The L1 gauges sum over every shard: refreshed at most every 100 ms, not per lookup.
  uint64_t at = m.gauges_at_ns.load(std::memory_order_relaxed);
  if (now - at > 100'000'000 &&
      m.gauges_at_ns.compare_exchange_strong(at, now, std::memory_order_relaxed)) {
    m.l1_bytes.Set(static_cast<double>(l1_.bytes()));
    m.l1_entries.Set(static_cast<double>(l1_.entries()));
    uint64_t ev = l1_.evictions();
    uint64_t seen = m.evictions_seen.exchange(ev);
    if (ev > seen) m.l1_evictions.Increment(static_cast<double>(ev - seen));
  }
  auto done = std::move(p->done);
  done(std::move(p->result));
}

RecordPtr FeatureStore::FillL1(HashedKey key, const GroupSpec& group, TierRecordPtr record,
                               uint64_t epoch_at_read, const RecordPtr& cached) {
  uint64_t now = NowNs();
  uint64_t deadline;
  uint64_t refresh;
  if (!record->found) {
    refresh = now + static_cast<uint64_t>(options_.negative_ttl.count()) * 1000;
    deadline = refresh;
  } else {
    refresh = now + static_cast<uint64_t>(options_.l1_ttl.count()) * 1000;
    int64_t left_us = group.max_age_us == 0
                          ? int64_t{3600} * 1000000
                          : record->event_time_us + group.max_age_us - UnixNowUs();
    deadline =
        left_us > options_.l1_ttl.count() ? now + static_cast<uint64_t>(left_us) * 1000 : refresh;
  }
  // A push of this key since the read was issued: its answer may predate the push; serve it to
  // this lookup but do not cache it.
  if (Epoch(key.hash).load(std::memory_order_acquire) != epoch_at_read) return record;
  // Unchanged since the copy in L1 (the common case on a refresh): keep that entry and move its
  // refresh time, instead of replacing it (no allocation, no admission, no eviction work).
  if (cached && cached->found == record->found && cached->event_time_us == record->event_time_us &&
      cached->payload == record->payload) {
    cached->refresh_after.store(refresh);
    return cached;
  }
  record->refresh_after.store(refresh);
  RecordPtr shared = std::move(record);
  l1_.Put(key.key, key.hash, shared, deadline, now);
  return shared;
}

// The analysis cannot tie w.cv to w.mu (CondVar holds a Mutex*).
LookupResult FeatureStore::LookupSync(LookupRequest request) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  // No promise/future: an L1 hit answers on this thread, before Lookup returns.
  struct Waiter {
    Mutex mu;
    CondVar cv{&mu};
    bool done DAIS_GUARDED_BY(mu) = false;
    LookupResult result;
  } w;
  Lookup(std::move(request), [&w](LookupResult r) {
    MutexLock l(&w.mu);
    w.result = std::move(r);
    w.done = true;
    w.cv.Signal();
  });
  MutexLock l(&w.mu);
  while (!w.done) w.cv.Wait();
  return std::move(w.result);
}

void FeatureStore::Push(FeatureSpecPtr spec, std::vector<PushRow> rows,
                        std::function<void(std::vector<StatusOr<bool>>)> done) {
  if (!tier_->Healthy()) {
    // Not connected: answer now rather than queue writes that can only time out.
    Status down =
        Unavailable("the online store (" + std::string(tier_->name()) + ") is not reachable");
    return done(std::vector<StatusOr<bool>>(rows.size(), StatusOr<bool>(down)));
  }
  std::vector<TierWrite> writes;
  std::vector<std::string> keys;
  writes.reserve(rows.size());
  for (auto& r : rows) {
    const GroupSpec& g = spec->groups[r.group];
    TierWrite w;
    w.key = RecordKey(*spec, g, r.entity_id);
    w.group = &g;
    w.event_time_us = r.event_time_us;
    w.payload = std::move(r.payload);
    keys.push_back(w.key);
    writes.push_back(std::move(w));
  }
  auto deadline = std::chrono::steady_clock::now() + options_.push_timeout;
  tier_->Write(std::move(writes), deadline,
               [this, spec, keys = std::move(keys),
                done = std::move(done)](std::vector<StatusOr<bool>> results) {
                 Invalidate(std::vector<std::string_view>(keys.begin(), keys.end()));
                 done(std::move(results));
               });
}

void FeatureStore::Invalidate(const std::vector<std::string_view>& keys) {
  for (std::string_view k : keys) {
    const uint64_t hash = HashOf(k);
    Epoch(hash).fetch_add(1, std::memory_order_acq_rel);
    l1_.Erase(k, hash);
  }
}

void FeatureStore::InvalidateAll() {
  for (auto& e : epochs_) e.fetch_add(1, std::memory_order_acq_rel);
  l1_.Clear();
}

std::vector<StatusOr<bool>> FeatureStore::PushSync(FeatureSpecPtr spec, std::vector<PushRow> rows) {
  std::promise<std::vector<StatusOr<bool>>> pr;
  auto f = pr.get_future();
  Push(std::move(spec), std::move(rows),
       [&pr](std::vector<StatusOr<bool>> r) { pr.set_value(std::move(r)); });
  return f.get();
}

}  // namespace dais::features
