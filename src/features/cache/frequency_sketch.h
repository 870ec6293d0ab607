// FrequencySketch: count-min sketch with 4-bit saturating counters and periodic halving
// ("aging"), the frequency estimator of TinyLFU (Einziger, Friedman, Manes) as in Caffeine.
//
// Four rows of `width` counters (width a power of two). As in Caffeine, the table is cut into
// 64-byte blocks and a key's four counters (one per row) lie in one block chosen by its re-mixed
// hash, so an Increment or Estimate touches one cache line. Increment bumps each of the four
// counters below 15; Estimate is their minimum. After `sample_size` increments that changed a
// counter, every counter is halved, so old popularity fades and the sketch follows a changing
// workload.
//
// Thread-safety: none; L1Cache keeps one per shard, guarded by the shard mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dais::features {

class FrequencySketch {
 public:
  static constexpr int kMaxCount = 15;

  // `width` is rounded up to a power of two, at least 16. `sample_size` 0 means 10 * width.
  explicit FrequencySketch(size_t width, size_t sample_size = 0);

  void Increment(uint64_t hash);
  int Estimate(uint64_t hash) const;
  // Zeroes every counter.
  void Reset();

  size_t width() const { return width_; }
  size_t sample_size() const { return sample_size_; }
  // Halvings done so far (for tests).
  uint64_t agings() const { return agings_; }
  size_t memory_bytes() const { return table_.size() * sizeof(Block); }

 private:
  // 8 words of 16 counters of 4 bits; row r uses words 2r and 2r+1.
  struct alignas(64) Block {
    uint64_t words[8];
  };
  void Halve();

  size_t width_;
  size_t sample_size_;
  std::vector<Block> table_;
  size_t additions_ = 0;
  uint64_t agings_ = 0;
};

}  // namespace dais::features
