// In-process online tier for standalone mode (no --redis): pushed and imported records live in a
// sharded hash map bounded in bytes. Same write rule as Redis (older event time never
// overwrites), storage TTL honoured on read. Thread-safe; callbacks run on the caller's thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/mutex.h"
#include "features/store/online_tier.h"

namespace dais::features {

class MemoryTier : public OnlineTier {
 public:
  explicit MemoryTier(size_t capacity_bytes);
  ~MemoryTier() override;
  void Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) override;
  void Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) override;
  bool Healthy() const override { return true; }
  const char* name() const override { return "memory"; }
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    RecordPtr record;
    uint64_t expires_ns = 0;  // steady clock; 0 = never
  };
  struct Shard {
    Mutex mu;
    std::unordered_map<std::string, Entry> map DAIS_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 32;
  Shard& ShardFor(const std::string& key);
  StatusOr<bool> WriteOne(TierWrite& write, uint64_t now, bool* full);
  void SweepExpired(uint64_t now);

  const size_t capacity_bytes_;
  std::atomic<size_t> bytes_{0};
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace dais::features
