#include "memory/memory_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <set>

#include "common/logging.h"
#include "memory/snapshot_files.h"
#include "metrics/registry.h"

namespace dais::memory {
namespace {

struct MemoryMetrics {
  metrics::Family<metrics::Counter>& requests;
  metrics::Family<metrics::Histogram>& search_seconds;
  metrics::Family<metrics::Gauge>& points;
  metrics::Family<metrics::Gauge>& bytes;
  metrics::Family<metrics::Counter>& expired;
  metrics::Family<metrics::Counter>& reloads;

  static MemoryMetrics& Get() {
    auto& r = metrics::Registry::Global();
    static MemoryMetrics m{
        r.AddCounter("dais_memory_requests_total",
                     "Vector memory requests by collection, operation (upsert, delete, get, "
                     "search) and result (ok or the error code)",
                     {"collection", "op", "result"}),
        r.AddHistogram("dais_memory_search_duration_seconds",
                       "Time to search a collection's local shards and merge the hits",
                       {"collection"},
                       {5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.5}),
        r.AddGauge("dais_memory_points", "Live points in a collection's local shards",
                   {"collection"}),
        r.AddGauge("dais_memory_index_bytes",
                   "Memory of a collection's local shards: graph, vectors, payloads",
                   {"collection"}),
        r.AddCounter("dais_memory_expired_points_total",
                     "Points removed because their collection's ttl passed", {"collection"}),
        r.AddCounter("dais_memory_shard_reloads_total",
                     "Shards loaded again because their replication log was trimmed past what "
                     "this process had read",
                     {"collection"}),
    };
    return m;
  }
};

std::string CodeName(const Status& s) {
  return s.ok() ? "ok" : std::string(StatusCodeName(s.code()));
}

}  // namespace

int ShardOf(std::string_view id, int shards) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int>(h % static_cast<uint64_t>(shards));
}

// One shard this process holds, and where its replication log is read on (the sequence read
// last; CatchUp's thread only, once published).
struct MemoryService::Replica {
  Replica(CollectionSpecPtr spec, int index)
      : shard(std::make_unique<Shard>(std::move(spec), index)) {}
  std::unique_ptr<Shard> shard;
  MemoryStore::LogEntry at;
};

// Replaced, never changed, once published (Host and Unhost publish a copy): a request keeps the
// one it found.
struct MemoryService::Collection {
  Collection(CollectionSpecPtr s, bool all)
      : spec(std::move(s)), shards(static_cast<size_t>(spec->shards)) {
    if (!all) return;
    for (int i = 0; i < spec->shards; ++i) shards[i] = std::make_shared<Replica>(spec, i);
  }
  Collection(const Collection& o) : spec(o.spec), shards(o.shards), local_seq(o.local_seq.load()) {}
  CollectionSpecPtr spec;
  std::vector<std::shared_ptr<Replica>> shards;  // null: a shard other processes hold (Host)
  std::atomic<uint64_t> local_seq{0};            // without a store

  // Unavailable naming the shards among `wanted` (empty: all) this process does not hold.
  Status Holds(const std::vector<int>& wanted) const {
    std::string missing, held;
    for (size_t i = 0; i < shards.size(); ++i) {
      const bool asked = wanted.empty() || std::find(wanted.begin(), wanted.end(),
                                                     static_cast<int>(i)) != wanted.end();
      if (shards[i] != nullptr) held += (held.empty() ? "" : ",") + std::to_string(i);
      if (asked && shards[i] == nullptr)
        missing += (missing.empty() ? "" : ",") + std::to_string(i);
    }
    if (missing.empty()) return OkStatus();
    return Unavailable("shard(s) " + missing + " of collection " + spec->name +
                       " are not held by this process (it holds " + (held.empty() ? "none" : held) +
                       "): search through the gateway, or name held shards with ?shards=");
  }
};

MemoryService::MemoryService(MemoryStore* store, MemoryOptions options)
    : store_(store), options_(std::move(options)) {
  SetSearchThreads(options_.search_threads);
}

void MemoryService::SetSearchThreads(int threads) {
  search_pool_.reset();  // runs what is queued, joins
  options_.search_threads = threads;
  if (threads > 0) {
    search_pool_ = std::make_unique<SearchPool>(threads, options_.max_queued_searches);
  }
}

MemoryService::~MemoryService() = default;

int64_t MemoryService::Now() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<MemoryService::Collection> MemoryService::Find(const std::string& name) const {
  MutexLock l(&mu_);
  auto it = collections_.find(name);
  return it == collections_.end() ? nullptr : it->second;
}

StatusOr<std::shared_ptr<MemoryService::Collection>> MemoryService::Found(
    const std::string& name) const {
  auto c = Find(name);
  if (c == nullptr) return NotFound("collection " + name + " does not exist");
  return c;
}

Status MemoryService::Restore(const Progress& progress) {
  if (store_ == nullptr) return OkStatus();
  ASSIGN_OR_RETURN(auto specs, store_->Specs());
  const int64_t now = Now();
  for (const auto& spec : specs) {
    auto c = std::make_shared<Collection>(spec, true);
    for (auto& r : c->shards) RETURN_IF_ERROR(LoadShard(*spec, r.get(), now, progress));
    MutexLock l(&mu_);
    collections_[spec->name] = std::move(c);
  }
  return OkStatus();
}

Status MemoryService::LoadShard(const CollectionSpec& spec, Replica* r, int64_t now,
                                const Progress& progress) {
  Shard* shard = r->shard.get();
  ASSIGN_OR_RETURN(r->at, store_->LogEnd(spec, shard->index()));
  size_t n = 0;
  std::vector<StoredPoint> batch;
  auto flush = [&] {
    shard->Restore(batch);
    n += batch.size();
    batch.clear();
    if (progress) progress(spec.name, shard->index(), n);
  };
  RETURN_IF_ERROR(store_->Load(spec, shard->index(), [&](StoredPoint p) {
    if (p.expires_ms != 0 && p.expires_ms <= now) return;
    batch.push_back(std::move(p));
    if (batch.size() == 50000) flush();
  }));
  flush();
  return OkStatus();
}

Status MemoryService::Snapshot(const std::string& root) {
  std::vector<std::shared_ptr<Collection>> all;
  {
    MutexLock l(&mu_);
    for (const auto& [name, c] : collections_) all.push_back(c);
  }
  const int64_t now = Now();
  for (const auto& c : all) {
    RETURN_IF_ERROR(WriteSnapshotSpec(root, *c->spec));
    for (const auto& r : c->shards) {
      if (r == nullptr) continue;  // another process's
      RETURN_IF_ERROR(
          WriteShardSnapshot(root, *c->spec, r->shard->index(), r->shard->Snapshot(), now));
    }
  }
  return OkStatus();
}

Status MemoryService::WriteBack(const CollectionSpec& spec, Shard* shard,
                                std::vector<StoredPoint> points) {
  if (store_ == nullptr) {
    shard->Restore(points);
    return OkStatus();
  }
  // Through the store (it hands out new sequences), one write per expiry time.
  std::map<int64_t, std::vector<Point>> by_expiry;
  for (auto& p : points) by_expiry[p.expires_ms].push_back(std::move(p.point));
  for (auto& [expires, batch] : by_expiry) {
    std::promise<StatusOr<uint64_t>> done;
    store_->Upsert(spec, shard->index(), batch, expires,
                   std::chrono::steady_clock::now() + options_.write_timeout,
                   [&](StatusOr<uint64_t> seq) { done.set_value(std::move(seq)); });
    ASSIGN_OR_RETURN(uint64_t seq, done.get_future().get());
    shard->Upsert(batch, expires, seq);
  }
  return OkStatus();
}

Status MemoryService::RestoreFromSnapshots(const std::string& root, const Progress& progress) {
  ASSIGN_OR_RETURN(auto specs, SnapshotSpecs(root));
  const int64_t now = Now();
  for (const auto& spec : specs) {
    if (Find(spec->name) != nullptr) continue;  // the hot tier has it
    RETURN_IF_ERROR(Create(spec));
    auto c = Find(spec->name);
    for (auto& r : c->shards) {
      Shard* shard = r->shard.get();
      std::vector<StoredPoint> points;
      auto day = ReadShardSnapshot(root, *spec, shard->index(), [&](StoredPoint p) {
        if (p.expires_ms == 0 || p.expires_ms > now) points.push_back(std::move(p));
      });
      if (!day.ok() && day.status().code() == StatusCode::kNotFound) continue;
      if (!day.ok()) return day.status();
      const size_t n = points.size();
      RETURN_IF_ERROR(WriteBack(*spec, shard, std::move(points)));
      if (progress) progress(spec->name, shard->index(), n);
    }
  }
  return OkStatus();
}

Status MemoryService::Create(CollectionSpecPtr spec) {
  if (auto existing = Find(spec->name)) {
    if (CollectionSpecJson(*existing->spec) == CollectionSpecJson(*spec)) return OkStatus();
    return AlreadyExists("collection " + spec->name +
                         " exists with a different spec: " + CollectionSpecJson(*existing->spec));
  }
  auto c = std::make_shared<Collection>(spec, true);
  if (store_ != nullptr) {
    RETURN_IF_ERROR(store_->SaveSpec(*spec));
    for (int i = 0; i < spec->shards; ++i) {
      ASSIGN_OR_RETURN(c->shards[static_cast<size_t>(i)]->at, store_->LogEnd(*spec, i));
    }
  }
  MutexLock l(&mu_);
  collections_.emplace(spec->name, std::move(c));
  return OkStatus();
}

Status MemoryService::Host(CollectionSpecPtr spec, int index, const Progress& progress) {
  if (store_ == nullptr) {
    return FailedPrecondition("holding a shard of " + spec->name +
                              " needs the durable store: start with --memory and --redis");
  }
  if (index < 0 || index >= spec->shards) {
    return InvalidArgument("shard " + std::to_string(index) + " of " + spec->name + " (it has " +
                           std::to_string(spec->shards) + ")");
  }
  auto r = std::make_shared<Replica>(spec, index);
  const int64_t now = Now();
  RETURN_IF_ERROR(LoadShard(*spec, r.get(), now, progress));
  if (r->at.seq == 0 && !options_.cold_tier.empty()) {
    // Never written in the store: new, or the store lost it. The newest snapshot, if any, is
    // written back (new sequences) and applied.
    std::vector<StoredPoint> points;
    auto day = ReadShardSnapshot(options_.cold_tier, *spec, index, [&](StoredPoint p) {
      if (p.expires_ms == 0 || p.expires_ms > now) points.push_back(std::move(p));
    });
    if (!day.ok() && day.status().code() != StatusCode::kNotFound) return day.status();
    if (day.ok() && !points.empty()) {
      const size_t n = points.size();
      // Its log entries come back to CatchUp with sequences the shard holds: no change.
      RETURN_IF_ERROR(WriteBack(*spec, r->shard.get(), std::move(points)));
      LOG_INFO("vector memory: {} shard {} rebuilt from the cold tier {} ({}): {} points",
               spec->name, index, options_.cold_tier, *day, n);
      if (progress) progress(spec->name, index, n);
    }
  }
  MutexLock l(&mu_);
  std::shared_ptr<Collection>& slot = collections_[spec->name];
  // A changed spec starts over: the shards held under the old one are placed again too (their
  // assignments changed with it).
  auto next = slot != nullptr && CollectionSpecJson(*slot->spec) == CollectionSpecJson(*spec)
                  ? std::make_shared<Collection>(*slot)
                  : std::make_shared<Collection>(spec, false);
  next->shards[static_cast<size_t>(index)] = std::move(r);
  slot = std::move(next);
  return OkStatus();
}

void MemoryService::Unhost(const std::string& name, int index) {
  MutexLock l(&mu_);
  auto it = collections_.find(name);
  if (it == collections_.end() || index < 0 || index >= it->second->spec->shards) return;
  auto next = std::make_shared<Collection>(*it->second);
  next->shards[static_cast<size_t>(index)] = nullptr;
  if (std::any_of(next->shards.begin(), next->shards.end(),
                  [](const auto& r) { return r != nullptr; })) {
    it->second = std::move(next);
    return;
  }
  collections_.erase(it);
  auto& m = MemoryMetrics::Get();
  m.points.Remove({name});
  m.bytes.Remove({name});
}

Status MemoryService::Drop(const std::string& name) {
  ASSIGN_OR_RETURN(auto c, Found(name));
  if (store_ != nullptr) RETURN_IF_ERROR(store_->Drop(*c->spec));
  MutexLock l(&mu_);
  collections_.erase(name);
  auto& m = MemoryMetrics::Get();
  m.points.Remove({name});
  m.bytes.Remove({name});
  return OkStatus();
}

StatusOr<CollectionSpecPtr> MemoryService::Spec(const std::string& name) const {
  ASSIGN_OR_RETURN(auto c, Found(name));
  return c->spec;
}

std::vector<CollectionStats> MemoryService::Stats() const {
  std::vector<std::shared_ptr<Collection>> all;
  {
    MutexLock l(&mu_);
    for (const auto& [name, c] : collections_) all.push_back(c);
  }
  std::vector<CollectionStats> out;
  for (const auto& c : all) {
    CollectionStats s;
    s.spec = c->spec;
    for (const auto& r : c->shards) {
      if (r == nullptr) continue;
      s.points += r->shard->size();
      s.memory_bytes += r->shard->memory_bytes();
      s.exact_searches += r->shard->exact_searches();
      s.held.push_back(r->shard->index());
    }
    out.push_back(s);
  }
  return out;
}

namespace {

// Calls `done` with the first error (or OK) once `n` parts have answered.
struct Join {
  Join(size_t n, MemoryService::Done d) : pending(n), done(std::move(d)) {}
  void Part(Status s) {
    if (!s.ok()) {
      MutexLock l(&mu);
      if (first.ok()) first = s;
    }
    if (pending.fetch_sub(1) == 1) done(first);
  }
  std::atomic<size_t> pending;
  MemoryService::Done done;
  Mutex mu;
  Status first;
};

// Splits `items` by the shard of their ids and calls write(shard, batch, join) for each shard
// that has some; `done` is called once every part answered (at once when there are none), and
// the request is counted under `op`.
template <typename Item, typename IdOf, typename Write>
void WriteByShard(const std::string& name, const char* op, int shards, std::vector<Item> items,
                  const IdOf& id_of, MemoryService::Done done, const Write& write) {
  std::vector<std::vector<Item>> by_shard(static_cast<size_t>(shards));
  for (Item& item : items) by_shard[ShardOf(id_of(item), shards)].push_back(std::move(item));
  size_t parts = 0;
  for (const auto& b : by_shard) parts += !b.empty();
  auto join = std::make_shared<Join>(parts, [done, name, op](Status s) {
    MemoryMetrics::Get().requests.Get({name, op, CodeName(s)}).Increment();
    done(s);
  });
  if (parts == 0) return join->done(OkStatus());
  for (size_t i = 0; i < by_shard.size(); ++i) {
    if (by_shard[i].empty()) continue;
    write(i, std::make_shared<std::vector<Item>>(std::move(by_shard[i])), join);
  }
}

}  // namespace

void MemoryService::Upsert(const std::string& name, std::vector<Point> points, Done done) {
  auto found = Found(name);
  if (!found.ok()) return done(found.status());
  auto c = *found;
  const int64_t expires = c->spec->ttl.count() == 0 ? 0 : Now() + c->spec->ttl.count() * 1000;
  WriteByShard(
      name, "upsert", c->spec->shards, std::move(points),
      [](const Point& p) -> const std::string& { return p.id; }, std::move(done),
      [this, c, expires](size_t i, std::shared_ptr<std::vector<Point>> batch,
                         std::shared_ptr<Join> join) {
        // Null: a shard other processes hold (they apply the write from its log).
        Shard* shard = c->shards[i] == nullptr ? nullptr : c->shards[i]->shard.get();
        if (store_ == nullptr) {
          shard->Upsert(*batch, expires, ++c->local_seq);
          return join->Part(OkStatus());
        }
        store_->Upsert(*c->spec, static_cast<int>(i), *batch, expires,
                       std::chrono::steady_clock::now() + options_.write_timeout,
                       [c, shard, batch, expires, join](StatusOr<uint64_t> seq) {
                         if (seq.ok() && shard != nullptr) shard->Upsert(*batch, expires, *seq);
                         join->Part(seq.status());
                       });
      });
}

void MemoryService::Delete(const std::string& name, std::vector<std::string> ids, Done done) {
  auto found = Found(name);
  if (!found.ok()) return done(found.status());
  auto c = *found;
  WriteByShard(
      name, "delete", c->spec->shards, std::move(ids),
      [](const std::string& id) -> const std::string& { return id; }, std::move(done),
      [this, c](size_t i, std::shared_ptr<std::vector<std::string>> batch,
                std::shared_ptr<Join> join) {
        Shard* shard = c->shards[i] == nullptr ? nullptr : c->shards[i]->shard.get();
        if (store_ == nullptr) {
          shard->Delete(*batch, ++c->local_seq, Now());
          return join->Part(OkStatus());
        }
        store_->Delete(*c->spec, static_cast<int>(i), *batch,
                       std::chrono::steady_clock::now() + options_.write_timeout,
                       [this, c, shard, batch, join](StatusOr<uint64_t> seq) {
                         if (seq.ok() && shard != nullptr) shard->Delete(*batch, *seq, Now());
                         join->Part(seq.status());
                       });
      });
}

StatusOr<std::vector<SearchHit>> MemoryService::Get(const std::string& name,
                                                    const std::vector<std::string>& ids,
                                                    bool with_vector,
                                                    const std::vector<int>& shards) const {
  ASSIGN_OR_RETURN(auto c, Found(name));
  const int64_t now = Now();
  std::vector<SearchHit> out;
  for (const std::string& id : ids) {
    const int s = ShardOf(id, c->spec->shards);
    if (!shards.empty() && std::find(shards.begin(), shards.end(), s) == shards.end()) continue;
    RETURN_IF_ERROR(c->Holds({s}));
    auto hit = c->shards[s]->shard->Get(id, with_vector, now);
    if (hit) out.push_back(std::move(*hit));
  }
  MemoryMetrics::Get().requests.Get({name, "get", "ok"}).Increment();
  return out;
}

void MemoryService::SearchAsync(std::string name, SearchRequest request, SearchDone done) const {
  if (request.received == std::chrono::steady_clock::time_point{}) {
    request.received = std::chrono::steady_clock::now();
  }
  if (search_pool_ == nullptr) return done(Search(name, request));
  // An unknown collection is answered here: it neither waits in the queue nor names a series
  // of the queue_full count below.
  if (auto c = Found(name); !c.ok()) return done(c.status());
  auto task = [this, name, request = std::move(request), done]() { done(Search(name, request)); };
  if (!search_pool_->Post(std::move(task))) {
    MemoryMetrics::Get().requests.Get({name, "search", "queue_full"}).Increment();
    done(Unavailable("search of " + name +
                     " refused: " + std::to_string(options_.max_queued_searches) +
                     " searches are waiting for a search thread already"));
  }
}

StatusOr<std::vector<SearchHit>> MemoryService::Search(const std::string& name,
                                                       const SearchRequest& request) const {
  ASSIGN_OR_RETURN(auto c, Found(name));
  RETURN_IF_ERROR(c->Holds(request.shards));
  const auto start = std::chrono::steady_clock::now();
  // The deadline counts from the request's arrival (a search thread's queue included).
  const auto received =
      request.received != std::chrono::steady_clock::time_point{} ? request.received : start;
  const int64_t now = Now();
  std::vector<SearchHit> hits;
  const auto deadline = received + std::chrono::milliseconds(request.timeout_ms);
  for (const auto& r : c->shards) {
    if (r == nullptr) continue;
    const Shard* shard = r->shard.get();
    if (!request.shards.empty() && std::find(request.shards.begin(), request.shards.end(),
                                             shard->index()) == request.shards.end()) {
      continue;
    }
    if (request.timeout_ms > 0 && std::chrono::steady_clock::now() > deadline) {
      MemoryMetrics::Get().requests.Get({name, "search", "deadline_exceeded"}).Increment();
      return DeadlineExceeded("search of " + name + " passed its timeout_ms " +
                              std::to_string(request.timeout_ms) + " after " +
                              std::to_string(shard->index()) + " of " +
                              std::to_string(c->shards.size()) + " shards");
    }
    auto part = shard->Search(request, now);
    hits.insert(hits.end(), std::make_move_iterator(part.begin()),
                std::make_move_iterator(part.end()));
  }
  const Metric m = c->spec->metric;
  std::stable_sort(hits.begin(), hits.end(),
                   [m](const auto& a, const auto& b) { return Better(m, a.score, b.score); });
  if (hits.size() > static_cast<size_t>(request.k)) hits.resize(request.k);
  auto& metrics = MemoryMetrics::Get();
  metrics.search_seconds.Get({name}).Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  metrics.requests.Get({name, "search", "ok"}).Increment();
  return hits;
}

Status MemoryService::SyncCollections() {
  if (store_ == nullptr) return OkStatus();
  ASSIGN_OR_RETURN(auto specs, store_->Specs());
  std::set<std::string> stored;
  const int64_t now = Now();
  for (const auto& spec : specs) {
    stored.insert(spec->name);
    if (Find(spec->name) != nullptr) continue;
    auto c = std::make_shared<Collection>(spec, true);
    for (auto& r : c->shards) RETURN_IF_ERROR(LoadShard(*spec, r.get(), now, {}));
    LOG_INFO("vector memory: collection {} created elsewhere: {} shard(s) loaded", spec->name,
             spec->shards);
    MutexLock l(&mu_);
    collections_.emplace(spec->name, std::move(c));
  }
  MutexLock l(&mu_);
  for (auto it = collections_.begin(); it != collections_.end();) {
    if (stored.count(it->first) != 0) {
      ++it;
      continue;
    }
    LOG_INFO("vector memory: collection {} dropped elsewhere", it->first);
    it = collections_.erase(it);
  }
  return OkStatus();
}

size_t MemoryService::CatchUp() {
  if (store_ == nullptr) return 0;
  std::vector<std::shared_ptr<Collection>> all;
  {
    MutexLock l(&mu_);
    for (const auto& [name, c] : collections_) all.push_back(c);
  }
  size_t applied = 0;
  const int64_t now = Now();
  for (const auto& c : all) {
    for (const auto& r : c->shards) {
      if (r != nullptr) applied += CatchUpShard(*c->spec, r.get(), now);
    }
  }
  return applied;
}

size_t MemoryService::CatchUpShard(const CollectionSpec& spec, Replica* r, int64_t now) {
  Shard* shard = r->shard.get();
  MemoryStore::LogEntry& at = r->at;
  if (at.position.empty()) return 0;  // the store keeps no log
  size_t applied = 0;
  for (;;) {
    auto entries = store_->ReadLog(spec, shard->index(), at.position, 100);
    if (!entries.ok()) {
      LOG_WARNING("vector memory: reading the log of {} shard {}: {}", spec.name, shard->index(),
                  entries.status().message());
      return applied;
    }
    for (const auto& e : *entries) {
      if (e.seq > at.seq + 1) {
        // Entries were trimmed before this replica read them: load the shard again.
        LOG_WARNING(
            "vector memory: {} shard {} fell behind its log (write {} after {}): "
            "loading it again from the store",
            spec.name, shard->index(), e.seq, at.seq);
        MemoryMetrics::Get().reloads.Get({spec.name}).Increment();
        shard->Clear();
        if (Status s = LoadShard(spec, r, now, {}); !s.ok()) {
          LOG_ERROR("vector memory: reloading {} shard {}: {}", spec.name, shard->index(),
                    s.message());
        }
        return applied;
      }
      at.position = e.position;
      at.seq = std::max(at.seq, e.seq);
      applied += ApplyLogEntry(spec, shard, e, now);
    }
    if (entries->size() < 100) return applied;
  }
}

size_t MemoryService::ApplyLogEntry(const CollectionSpec& spec, Shard* shard,
                                    const MemoryStore::LogEntry& e, int64_t now) {
  if (e.seq == 0) return 0;
  if (!e.upsert) {
    std::vector<std::string> ids;
    for (const auto& [id, unused] : e.points) ids.push_back(id);
    shard->Delete(ids, e.seq, now);
    return ids.size();
  }
  std::vector<StoredPoint> points;
  for (const auto& [id, value] : e.points) {
    auto p = DecodeStored(id, value, e.seq, spec);
    if (!p.ok()) {
      LOG_WARNING("vector memory: {}; skipped", p.status().message());
      continue;
    }
    points.push_back(std::move(*p));
  }
  shard->Restore(points);  // the sequence decides: this replica's own writes change nothing
  return points.size();
}

void MemoryService::Sweep() {
  std::vector<std::shared_ptr<Collection>> all;
  {
    MutexLock l(&mu_);
    for (const auto& [name, c] : collections_) all.push_back(c);
  }
  const int64_t now = Now();
  auto& m = MemoryMetrics::Get();
  for (const auto& c : all) {
    size_t points = 0, bytes = 0;
    for (const auto& r : c->shards) {
      if (r == nullptr) continue;
      Shard* shard = r->shard.get();
      auto expired = shard->Expire(now);
      if (!expired.empty()) {
        m.expired.Get({c->spec->name}).Increment(static_cast<double>(expired.size()));
        if (store_ != nullptr) store_->Forget(*c->spec, shard->index(), expired);
      }
      points += shard->size();
      bytes += shard->memory_bytes();
    }
    m.points.Get({c->spec->name}).Set(static_cast<double>(points));
    m.bytes.Get({c->spec->name}).Set(static_cast<double>(bytes));
  }
}

}  // namespace dais::memory
