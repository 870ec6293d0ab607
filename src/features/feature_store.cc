#include "features/feature_store.h"

#include <future>

#include "common/logging.h"
#include "dais/clock.h"
#include "metrics/registry.h"

namespace dais::features {

namespace {

struct StoreMetrics {
  metrics::Family<metrics::Counter>& values;
  metrics::Family<metrics::Counter>& l1;
  metrics::Family<metrics::Counter>& tier_errors;
  metrics::Family<metrics::Counter>& fallbacks;
  metrics::Family<metrics::Histogram>& latency;
  metrics::Gauge& l1_bytes;
  metrics::Gauge& l1_entries;
  metrics::Counter& l1_evictions;
  std::atomic<uint64_t> evictions_seen{0};

  static StoreMetrics& Get() {
    auto& r = metrics::Registry::Global();
    static StoreMetrics m{
        r.AddCounter("dais_feature_values_total",
                     "Feature records returned, by group and status (present, stale, "
                     "not_found, defaulted)",
                     {"domain", "group", "status"}),
        r.AddCounter("dais_feature_l1_requests_total",
                     "L1 (in-process) cache lookups by result (hit, miss)", {"result"}),
        r.AddCounter("dais_feature_tier_errors_total",
                     "Online tier reads that failed (unavailable, deadline, bad record)",
                     {"tier", "code"}),
        r.AddCounter("dais_feature_fallbacks_total",
                     "Records served from L1 past their refresh time because the tier failed",
                     {"tier"}),
        r.AddHistogram("dais_feature_lookup_duration_us",
                       "Feature lookup latency in microseconds, by the deepest tier it needed "
                       "(l1, redis, memory)",
                       {"tier"},
                       {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                        100000, 200000, 500000, 1000000}),
        r.AddGauge("dais_feature_l1_bytes", "Bytes charged to the L1 feature cache", {}).Get({}),
        r.AddGauge("dais_feature_l1_entries", "Entries in the L1 feature cache", {}).Get({}),
        r.AddCounter("dais_feature_l1_evictions_total", "Entries evicted from the L1 cache", {})
            .Get({}),
    };
    return m;
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
  std::vector<std::vector<size_t>> slots;  // unique key -> result indices
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

void FeatureStore::Lookup(LookupRequest req, std::function<void(LookupResult)> done) {
  auto p = std::make_shared<Pending>();
  p->start_ns = NowNs();
  p->now_us = UnixNowUs();
  p->done = std::move(done);
  LookupResult& res = p->result;
  res.spec = req.spec;
  res.groups = req.groups;
  const FeatureSpec& spec = *req.spec;
  // Row count: every entity column the groups need has the same length (the caller checks).
  res.rows = 0;
  for (size_t g : req.groups) {
    auto it = req.entities.find(spec.groups[g].entity);
    if (it == req.entities.end()) {
      DAIS_BUG("feature lookup without the entity column {}", spec.groups[g].entity);
      req.groups.clear();
      res.groups.clear();
      break;
    }
    res.rows = std::max(res.rows, it->second.size());
  }
  const size_t n = res.rows * res.groups.size();
  res.records.assign(n, nullptr);
  res.statuses.assign(n, FeatureStatus::kDefaulted);
  if (access_) {
    for (const auto& [entity, ids] : req.entities) {
      for (const auto& id : ids) access_->Offer(spec.domain + ":" + entity + "=" + id);
    }
  }

  std::unordered_map<std::string, size_t> unique;
  std::vector<std::string> keys;
  for (size_t row = 0; row < res.rows; ++row) {
    for (size_t g = 0; g < res.groups.size(); ++g) {
      const GroupSpec& group = spec.groups[res.groups[g]];
      const auto& ids = req.entities[group.entity];
      if (row >= ids.size()) continue;  // ragged columns: DEFAULTED (the caller checks)
      std::string key = RecordKey(spec, group, ids[row]);
      auto [it, inserted] = unique.try_emplace(key, keys.size());
      if (inserted) {
        keys.push_back(std::move(key));
        p->slots.emplace_back();
        p->key_group.push_back(&group);
      }
      p->slots[it->second].push_back(res.Index(row, g));
    }
  }
  p->remaining = keys.size() + 1;
  auto deadline = req.deadline == std::chrono::steady_clock::time_point{}
                      ? std::chrono::steady_clock::now() + options_.lookup_timeout
                      : req.deadline;
  StoreMetrics& m = StoreMetrics::Get();
  std::vector<TierRead> reads;
  uint64_t now_ns = p->start_ns;
  uint64_t hits = 0, misses = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    RecordPtr rec = l1_.Get(keys[k], now_ns);
    if (rec && now_ns < rec->refresh_after_ns) {
      ++hits;
      Resolve(p, k, rec, nullptr);
      continue;
    }
    ++misses;
    RecordPtr fallback = rec;
    bool leader = flights_.Join(keys[k], [this, p, k, fallback](const StatusOr<RecordPtr>& r) {
      Resolve(p, k, r, fallback);
    });
    if (leader) reads.push_back(TierRead{keys[k], p->key_group[k]});
  }
  if (hits) m.l1.Get({"hit"}).Increment(static_cast<double>(hits));
  if (misses) {
    m.l1.Get({"miss"}).Increment(static_cast<double>(misses));
    p->used_tier = true;
  }
  if (!reads.empty()) {
    tier_->Read(reads, deadline, [this, reads](std::vector<StatusOr<RecordPtr>> results) {
      for (size_t i = 0; i < reads.size(); ++i) {
        if (results[i].ok()) {
          FillL1(reads[i].key, *reads[i].group, *results[i]);
        } else {
          const char* code =
              results[i].status().code() == StatusCode::kDeadlineExceeded ? "deadline_exceeded"
              : results[i].status().code() == StatusCode::kUnavailable    ? "unavailable"
                                                                          : "internal";
          StoreMetrics::Get().tier_errors.Get({tier_->name(), code}).Increment();
          LOG_VERBOSE(1, "feature read {}: {}", reads[i].key, results[i].status().message());
        }
        flights_.Complete(reads[i].key, results[i]);
      }
    });
  }
  if (p->remaining.fetch_sub(1) == 1) Finish(p);
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
  for (size_t slot : p->slots[k]) {
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
    uint64_t counts[4] = {0, 0, 0, 0};
    for (size_t row = 0; row < res.rows; ++row) {
      ++counts[static_cast<int>(res.statuses[res.Index(row, g)])];
    }
    static const char* kNames[4] = {"present", "stale", "not_found", "defaulted"};
    for (int s = 0; s < 4; ++s) {
      if (counts[s]) {
        m.values.Get({spec.domain, spec.groups[res.groups[g]].name, kNames[s]})
            .Increment(static_cast<double>(counts[s]));
      }
    }
  }
  m.latency.Get({p->used_tier ? tier_->name() : "l1"})
      .Observe(static_cast<double>(NowNs() - p->start_ns) / 1e3);
  m.l1_bytes.Set(static_cast<double>(l1_.bytes()));
  m.l1_entries.Set(static_cast<double>(l1_.entries()));
  uint64_t ev = l1_.evictions();
  uint64_t seen = m.evictions_seen.exchange(ev);
  if (ev > seen) m.l1_evictions.Increment(static_cast<double>(ev - seen));
  auto done = std::move(p->done);
  done(std::move(p->result));
}

void FeatureStore::FillL1(const std::string& key, const GroupSpec& group, const RecordPtr& record) {
  uint64_t now = NowNs();
  auto copy = std::make_shared<CachedRecord>(*record);
  uint64_t deadline;
  if (!record->found) {
    copy->refresh_after_ns = now + static_cast<uint64_t>(options_.negative_ttl.count()) * 1000;
    deadline = copy->refresh_after_ns;
  } else {
    copy->refresh_after_ns = now + static_cast<uint64_t>(options_.l1_ttl.count()) * 1000;
    int64_t left_us = group.max_age_us == 0
                          ? int64_t{3600} * 1000000
                          : record->event_time_us + group.max_age_us - UnixNowUs();
    deadline = left_us > options_.l1_ttl.count() ? now + static_cast<uint64_t>(left_us) * 1000
                                                 : copy->refresh_after_ns;
  }
  l1_.Put(key, std::move(copy), deadline, now);
}

LookupResult FeatureStore::LookupSync(LookupRequest request) {
  std::promise<LookupResult> pr;
  auto f = pr.get_future();
  Lookup(std::move(request), [&pr](LookupResult r) { pr.set_value(std::move(r)); });
  return f.get();
}

void FeatureStore::Push(FeatureSpecPtr spec, std::vector<PushRow> rows,
                        std::function<void(std::vector<StatusOr<bool>>)> done) {
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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  tier_->Write(std::move(writes), deadline,
               [this, spec, keys = std::move(keys),
                done = std::move(done)](std::vector<StatusOr<bool>> results) {
                 for (const auto& k : keys) l1_.Erase(k);
                 done(std::move(results));
               });
}

std::vector<StatusOr<bool>> FeatureStore::PushSync(FeatureSpecPtr spec, std::vector<PushRow> rows) {
  std::promise<std::vector<StatusOr<bool>>> pr;
  auto f = pr.get_future();
  Push(std::move(spec), std::move(rows),
       [&pr](std::vector<StatusOr<bool>> r) { pr.set_value(std::move(r)); });
  return f.get();
}

}  // namespace dais::features
