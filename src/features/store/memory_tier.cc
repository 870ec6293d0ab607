#include "features/store/memory_tier.h"

#include <random>

#include "dais/clock.h"
#include "fmt/format.h"

namespace dais::features {

namespace {
size_t Charge(const std::string& key, const CachedRecord& r) {
  return key.size() + r.payload.size() + 96;
}
}  // namespace

MemoryTier::MemoryTier(size_t capacity_bytes)
    : capacity_bytes_(capacity_bytes), shards_(std::make_unique<Shard[]>(kShards)) {}

MemoryTier::~MemoryTier() = default;

MemoryTier::Shard& MemoryTier::ShardFor(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

void MemoryTier::Read(std::vector<TierRead> reads, Deadline, ReadCallback cb) {
  std::vector<StatusOr<TierRecordPtr>> out;
  out.reserve(reads.size());
  uint64_t now = NowNs();
  for (const auto& r : reads) {
    Shard& s = ShardFor(r.key);
    MutexLock l(&s.mu);
    auto it = s.map.find(r.key);
    if (it != s.map.end() && it->second.expires_ns != 0 && it->second.expires_ns <= now) {
      bytes_.fetch_sub(Charge(it->first, *it->second.record), std::memory_order_relaxed);
      s.map.erase(it);  // expired by its storage TTL
      it = s.map.end();
    }
    if (it == s.map.end()) {
      out.emplace_back(std::make_shared<CachedRecord>());
    } else {
      out.emplace_back(std::make_shared<CachedRecord>(*it->second.record));
    }
  }
  cb(std::move(reads), std::move(out));
}

void MemoryTier::SweepExpired(uint64_t now) {
  for (size_t i = 0; i < kShards; ++i) {
    Shard& s = shards_[i];
    MutexLock l(&s.mu);
    for (auto it = s.map.begin(); it != s.map.end();) {
      if (it->second.expires_ns != 0 && it->second.expires_ns <= now) {
        bytes_.fetch_sub(Charge(it->first, *it->second.record), std::memory_order_relaxed);
        it = s.map.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// One write; false (and nothing changed) when it does not fit.
StatusOr<bool> MemoryTier::WriteOne(TierWrite& w, uint64_t now, bool* full) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  *full = false;
  auto rec = std::make_shared<CachedRecord>();
  rec->found = true;
  rec->event_time_us = w.event_time_us;
  rec->payload = w.payload;
  size_t charge = Charge(w.key, *rec);
  Shard& s = ShardFor(w.key);
  MutexLock l(&s.mu);
  auto it = s.map.find(w.key);
  bool live = it != s.map.end() && (it->second.expires_ns == 0 || it->second.expires_ns > now);
  if (live && it->second.record->event_time_us > w.event_time_us) return false;
  size_t old = it == s.map.end() ? 0 : Charge(it->first, *it->second.record);
  if (bytes_.load(std::memory_order_relaxed) - old + charge > capacity_bytes_) {
    *full = true;
    return ResourceExhausted(fmt::format(
        "the in-process feature tier is full ({} bytes; raise --feature-memory-bytes or use "
        "--redis)",
        capacity_bytes_));
  }
  uint64_t expires = 0;
  if (w.group->ttl_ms > 0) {
    double stretch = 1.0 + std::uniform_real_distribution<double>(0, w.group->ttl_jitter)(rng);
    expires = now + static_cast<uint64_t>(static_cast<double>(w.group->ttl_ms) * 1e6 * stretch);
  }
  bytes_.fetch_add(charge, std::memory_order_relaxed);
  bytes_.fetch_sub(old, std::memory_order_relaxed);
  s.map[w.key] = Entry{std::move(rec), expires};
  return true;
}

void MemoryTier::Write(std::vector<TierWrite> writes, Deadline, WriteCallback cb) {
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  uint64_t now = NowNs();
  bool swept = false;
  for (auto& w : writes) {
    bool full = false;
    StatusOr<bool> r = WriteOne(w, now, &full);
    if (full && !swept) {
      // Reclaim records past their storage TTL (once per call), then try again.
      SweepExpired(now);
      swept = true;
      r = WriteOne(w, now, &full);
    }
    out.push_back(std::move(r));
  }
  cb(std::move(out));
}

}  // namespace dais::features
