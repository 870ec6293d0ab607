#include "features/cache/heavy_hitters.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/mutex.h"
#include "features/cache/hashed_key.h"

namespace dais::features {
namespace {

using Map = std::unordered_map<std::string, uint32_t, KeyHash, KeyEq>;

bool ParseU64(std::string_view s, uint64_t* v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ByCountDesc(const HeavyHitters::Item& a, const HeavyHitters::Item& b) {
  if (a.count != b.count) return a.count > b.count;
  return a.key < b.key;
}

}  // namespace

// One Space-Saving summary: the monitored keys in a hash map whose value is the key's slot in a
// min-heap ordered by count; each slot points back at its map entry (entries of an unordered_map
// keep their address across rehashing).
class HeavyHitters::Shard {
 public:
  void Init(size_t capacity) {
    capacity_ = capacity;
    MutexLock lock(&mu_);
    map_.reserve(capacity);
    heap_.reserve(capacity);
  }

  void Add(std::string_view key, uint64_t hash, uint64_t count, uint64_t error) DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = map_.find(HashedKey{key, hash});
    if (it != map_.end()) {
      Slot& slot = heap_[it->second];
      slot.count += count;
      slot.error += error;
      SiftDown(it->second);
      return;
    }
    if (heap_.size() < capacity_) {
      auto [pos, inserted] = map_.emplace(std::string(key), static_cast<uint32_t>(heap_.size()));
      heap_.push_back(Slot{count, error, &*pos});
      SiftUp(static_cast<uint32_t>(heap_.size() - 1));
      return;
    }
    // Replace the minimum: reuse its map node (and the string's buffer) for the new key.
    Slot& root = heap_[0];
    uint64_t min = root.count;
    auto node = map_.extract(map_.find(root.entry->first));
    node.key().assign(key);
    node.mapped() = 0;
    auto inserted = map_.insert(std::move(node));
    root = Slot{min + count, min + error, &*inserted.position};
    SiftDown(0);
  }

  void AppendItems(std::vector<Item>* out) const DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (const Slot& s : heap_) out->push_back(Item{s.entry->first, s.count, s.error});
  }

  void Reset() DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    heap_.clear();
    map_.clear();
  }

  size_t size() const DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return heap_.size();
  }

 private:
  struct Slot {
    uint64_t count;
    uint64_t error;
    Map::value_type* entry;
  };

  void Place(uint32_t i, const Slot& s) DAIS_REQUIRES(mu_) {
    heap_[i] = s;
    s.entry->second = i;
  }

  void SiftUp(uint32_t i) DAIS_REQUIRES(mu_) {
    Slot s = heap_[i];
    while (i > 0) {
      uint32_t parent = (i - 1) / 2;
      if (heap_[parent].count <= s.count) break;
      Place(i, heap_[parent]);
      i = parent;
    }
    Place(i, s);
  }

  void SiftDown(uint32_t i) DAIS_REQUIRES(mu_) {
    Slot s = heap_[i];
    const size_t n = heap_.size();
    while (true) {
      size_t child = 2 * size_t{i} + 1;
      if (child >= n) break;
      if (child + 1 < n && heap_[child + 1].count < heap_[child].count) ++child;
      if (heap_[child].count >= s.count) break;
      Place(i, heap_[child]);
      i = static_cast<uint32_t>(child);
    }
    Place(i, s);
  }

  mutable Mutex mu_;
  size_t capacity_ = 0;
  Map map_ DAIS_GUARDED_BY(mu_);
  std::vector<Slot> heap_ DAIS_GUARDED_BY(mu_);
};

HeavyHitters::HeavyHitters(size_t capacity, int shards) : capacity_(std::max<size_t>(capacity, 1)) {
  size_t n = shards > 0 ? std::bit_ceil(static_cast<size_t>(shards))
                        : std::clamp<size_t>(std::bit_floor(capacity_ / 256), 1, 16);
  while (n > 1 && n > capacity_) n /= 2;
  num_shards_ = n;
  shards_ = std::make_unique<Shard[]>(num_shards_);
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].Init(capacity_ / num_shards_);
}

HeavyHitters::~HeavyHitters() = default;

bool HeavyHitters::ValidKey(std::string_view key) {
  return key.find_first_of("\n\t") == std::string_view::npos;
}

HeavyHitters::Shard& HeavyHitters::ShardFor(uint64_t hash) {
  // Different bits from the ones the shard's map uses for buckets (hash modulo a prime).
  return shards_[(hash >> 48) & (num_shards_ - 1)];
}

void HeavyHitters::Offer(std::string_view key, uint64_t count) {
  if (count == 0) return;
  if (!ValidKey(key)) {
    rejected_keys_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t hash = HashOf(key);
  ShardFor(hash).Add(key, hash, count, 0);
}

std::vector<HeavyHitters::Item> HeavyHitters::Top(size_t n) const {
  std::vector<Item> items;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AppendItems(&items);
  n = std::min(n, items.size());
  std::partial_sort(items.begin(), items.begin() + static_cast<ptrdiff_t>(n), items.end(),
                    ByCountDesc);
  items.resize(n);
  return items;
}

void HeavyHitters::Merge(const std::vector<Item>& items) {
  for (const Item& item : items) {
    if (item.count == 0) continue;
    if (!ValidKey(item.key)) {
      rejected_keys_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    uint64_t hash = HashOf(item.key);
    ShardFor(hash).Add(item.key, hash, item.count, std::min(item.error, item.count));
  }
}

void HeavyHitters::Reset() {
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].Reset();
}

size_t HeavyHitters::size() const {
  size_t n = 0;
  for (size_t i = 0; i < num_shards_; ++i) n += shards_[i].size();
  return n;
}

std::string HeavyHitters::Serialize(size_t top_n) const {
  std::string out(kHeader);
  out += '\n';
  for (const Item& item : Top(top_n)) {
    fmt::format_to(std::back_inserter(out), "{}\t{}\t{}\n", item.count, item.error, item.key);
  }
  return out;
}

StatusOr<std::vector<HeavyHitters::Item>> HeavyHitters::Parse(std::string_view text) {
  std::vector<Item> items;
  std::unordered_set<std::string_view> seen;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    auto error = [line_no](std::string_view what) {
      return InvalidArgument(fmt::format("heavy hitters line {}: {}", line_no, what));
    };
    if (line_no == 1) {
      if (line != kHeader) return error(fmt::format("expected header \"{}\"", kHeader));
      continue;
    }
    size_t tab1 = line.find('\t');
    size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos) return error("expected \"<count>\\t<error>\\t<key>\"");
    Item item;
    if (!ParseU64(line.substr(0, tab1), &item.count)) return error("count is not a uint64");
    if (!ParseU64(line.substr(tab1 + 1, tab2 - tab1 - 1), &item.error)) {
      return error("error is not a uint64");
    }
    if (item.error > item.count) return error("error exceeds count");
    std::string_view key = line.substr(tab2 + 1);
    if (!ValidKey(key)) return error("key contains a tab");
    if (!seen.insert(key).second) return error("duplicate key");
    item.key.assign(key);
    items.push_back(std::move(item));
  }
  if (line_no == 0) return InvalidArgument("heavy hitters line 1: empty text, expected header");
  return items;
}

}  // namespace dais::features
