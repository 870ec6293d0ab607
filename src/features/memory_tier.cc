#include "features/memory_tier.h"

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
    if (it == s.map.end() || (it->second.expires_ns != 0 && it->second.expires_ns <= now)) {
      out.emplace_back(std::make_shared<CachedRecord>());
    } else {
      out.emplace_back(std::make_shared<CachedRecord>(*it->second.record));
    }
  }
  cb(std::move(reads), std::move(out));
}

void MemoryTier::Write(std::vector<TierWrite> writes, Deadline, WriteCallback cb) {
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  uint64_t now = NowNs();
  thread_local std::mt19937_64 rng(std::random_device{}());
  for (auto& w : writes) {
    auto rec = std::make_shared<CachedRecord>();
    rec->found = true;
    rec->event_time_us = w.event_time_us;
    rec->payload = std::move(w.payload);
    size_t charge = Charge(w.key, *rec);
    Shard& s = ShardFor(w.key);
    MutexLock l(&s.mu);
    auto it = s.map.find(w.key);
    bool live = it != s.map.end() && (it->second.expires_ns == 0 || it->second.expires_ns > now);
    if (live && it->second.record->event_time_us > w.event_time_us) {
      out.emplace_back(false);
      continue;
    }
    size_t old = it == s.map.end() ? 0 : Charge(it->first, *it->second.record);
    if (bytes_.load(std::memory_order_relaxed) - old + charge > capacity_bytes_) {
      out.emplace_back(
          ResourceExhausted(fmt::format("the in-process feature tier is full ({} bytes; raise "
                                        "--feature-memory-bytes or use --redis)",
                                        capacity_bytes_)));
      continue;
    }
    uint64_t expires = 0;
    if (w.group->ttl_ms > 0) {
      double stretch = 1.0 + std::uniform_real_distribution<double>(0, w.group->ttl_jitter)(rng);
      expires = now + static_cast<uint64_t>(static_cast<double>(w.group->ttl_ms) * 1e6 * stretch);
    }
    bytes_.fetch_add(charge, std::memory_order_relaxed);
    bytes_.fetch_sub(old, std::memory_order_relaxed);
    s.map[w.key] = Entry{std::move(rec), expires};
    out.emplace_back(true);
  }
  cb(std::move(out));
}

}  // namespace dais::features
