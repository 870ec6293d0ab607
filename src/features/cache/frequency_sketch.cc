#include "features/cache/frequency_sketch.h"

#include <algorithm>
#include <bit>

namespace dais::features {
namespace {

constexpr int kRows = 4;
constexpr int kCountersPerRowPerBlock = 32;  // two words of 16

// MurmurHash3's 64-bit finalizer: the caller's hash may be weak in some bits.
uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Where a key's counter of row `row` is inside its block: low 40 bits pick the block, the top
// 24 bits pick, per row, one of the row's two words (1 bit) and a counter in it (4 bits).
struct Slot {
  int word;
  int shift;
};
Slot SlotOf(uint64_t mixed, int row) {
  uint64_t bits = mixed >> (40 + 5 * row);
  return Slot{2 * row + static_cast<int>(bits & 1), static_cast<int>((bits >> 1) & 15) * 4};
}

}  // namespace

FrequencySketch::FrequencySketch(size_t width, size_t sample_size)
    : width_(std::bit_ceil(std::max<size_t>(width, kCountersPerRowPerBlock))),
      sample_size_(sample_size == 0 ? 10 * width_ : sample_size),
      table_(width_ / kCountersPerRowPerBlock, Block{}) {}

void FrequencySketch::Increment(uint64_t hash) {
  uint64_t mixed = Mix(hash);
  Block& block = table_[mixed & (table_.size() - 1)];
  bool added = false;
  for (int row = 0; row < kRows; ++row) {
    Slot slot = SlotOf(mixed, row);
    uint64_t& word = block.words[slot.word];
    if (((word >> slot.shift) & 0xf) < kMaxCount) {
      word += uint64_t{1} << slot.shift;
      added = true;
    }
  }
  if (added && ++additions_ >= sample_size_) Halve();
}

int FrequencySketch::Estimate(uint64_t hash) const {
  uint64_t mixed = Mix(hash);
  const Block& block = table_[mixed & (table_.size() - 1)];
  int min = kMaxCount;
  for (int row = 0; row < kRows; ++row) {
    Slot slot = SlotOf(mixed, row);
    min = std::min(min, static_cast<int>((block.words[slot.word] >> slot.shift) & 0xf));
  }
  return min;
}

void FrequencySketch::Halve() {
  for (Block& block : table_) {
    for (uint64_t& word : block.words) word = (word >> 1) & 0x7777777777777777ULL;
  }
  additions_ /= 2;
  ++agings_;
}

void FrequencySketch::Reset() {
  std::fill(table_.begin(), table_.end(), Block{});
  additions_ = 0;
}

}  // namespace dais::features
