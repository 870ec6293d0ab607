#include "features/cache/l1_cache.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "features/cache/frequency_sketch.h"
#include "features/cache/hashed_key.h"
#include "features/cache/l1_nodes.h"

namespace dais::features {
namespace {

// Share of a shard's capacity given to the admission window, and of the main region given to
// the protected segment (Caffeine's defaults).
constexpr size_t kWindowPercent = 1;
constexpr size_t kProtectedPercent = 80;
// Charge assumed for sizing a shard's frequency sketch (entries ~ capacity / this).
constexpr size_t kTypicalChargeBytes = 128;

using l1::List;
using l1::Node;
using l1::NodeIndex;
using l1::Queue;

}  // namespace

class alignas(64) L1Cache::Shard {
 public:
  void Init(size_t capacity) {
    capacity_ = capacity;
    window_capacity_ = capacity * kWindowPercent / 100;
    protected_capacity_ = (capacity - window_capacity_) * kProtectedPercent / 100;
    size_t expected_entries = std::max<size_t>(capacity / kTypicalChargeBytes, 1);
    sketch_ = std::make_unique<FrequencySketch>(4 * expected_entries, 10 * expected_entries);
  }

  RecordPtr Get(std::string_view key, uint64_t hash, uint64_t now_ns) DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    sketch_->Increment(hash);
    Node* n = Find(key, hash);
    if (n == nullptr) return nullptr;
    if (now_ns >= n->deadline_ns) {
      ++expirations_;
      Remove(n);
      return nullptr;
    }
    OnAccess(n);
    return n->record;
  }

  bool Put(std::string_view key, uint64_t hash, RecordPtr record, size_t charge,
           uint64_t deadline_ns, uint64_t now_ns) DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    Node* n = Find(key, hash);
    if (record == nullptr || deadline_ns <= now_ns || charge > capacity_) {
      // Not stored: the previous value of the key must not outlive this newer write.
      if (n != nullptr) Remove(n);
      if (record != nullptr && charge > capacity_) ++rejections_;
      return false;
    }
    if (n != nullptr) {
      BytesOf(n->queue) += charge;
      BytesOf(n->queue) -= n->charge;
      n->charge = charge;
      n->record = std::move(record);
      n->deadline_ns = deadline_ns;
      ListOf(n->queue).MoveToFront(n);
      if (n->queue == Queue::kProtected) DemoteProtectedOverflow();
      EvictFromMain({}, now_ns);
      return Find(key, hash) != nullptr;
    }
    n = nodes_.Insert(key, hash);
    n->record = std::move(record);
    n->deadline_ns = deadline_ns;
    n->charge = charge;
    n->queue = Queue::kWindow;
    window_.PushFront(n);
    window_bytes_ += charge;
    // Entries pushed out of the window become admission candidates at the front of probation,
    // oldest first in `candidates`.
    std::vector<Node*> candidates;
    while (window_bytes_ > window_capacity_ && !window_.empty()) {
      Node* c = window_.back();
      Move(c, Queue::kProbation);
      c->candidate = true;
      candidates.push_back(c);
    }
    EvictFromMain(candidates, now_ns);
    return Find(key, hash) != nullptr;
  }

  void Erase(std::string_view key, uint64_t hash) DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    Node* n = Find(key, hash);
    if (n != nullptr) Remove(n);
  }

  void Clear() DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    window_.Reset();
    probation_.Reset();
    protected_.Reset();
    nodes_.Clear();
    window_bytes_ = probation_bytes_ = protected_bytes_ = 0;
    sketch_->Reset();
  }

  struct Stats {
    size_t bytes = 0;
    size_t entries = 0;
    uint64_t evictions = 0;
    uint64_t rejections = 0;
    uint64_t expirations = 0;
  };
  void AddStats(Stats* s) const DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    s->bytes += window_bytes_ + probation_bytes_ + protected_bytes_;
    s->entries += nodes_.size();
    s->evictions += evictions_;
    s->rejections += rejections_;
    s->expirations += expirations_;
  }

 private:
  size_t& BytesOf(Queue q) DAIS_REQUIRES(mu_) {
    switch (q) {
      case Queue::kWindow:
        return window_bytes_;
      case Queue::kProbation:
        return probation_bytes_;
      case Queue::kProtected:
        break;
    }
    return protected_bytes_;
  }
  List& ListOf(Queue q) DAIS_REQUIRES(mu_) {
    switch (q) {
      case Queue::kWindow:
        return window_;
      case Queue::kProbation:
        return probation_;
      case Queue::kProtected:
        break;
    }
    return protected_;
  }
  size_t total_bytes() const DAIS_REQUIRES(mu_) {
    return window_bytes_ + probation_bytes_ + protected_bytes_;
  }

  // Moves `n` to the front of queue `to`.
  void Move(Node* n, Queue to) DAIS_REQUIRES(mu_) {
    List::Unlink(n);
    BytesOf(n->queue) -= n->charge;
    n->queue = to;
    ListOf(to).PushFront(n);
    BytesOf(to) += n->charge;
  }

  void OnAccess(Node* n) DAIS_REQUIRES(mu_) {
    switch (n->queue) {
      case Queue::kWindow:
        window_.MoveToFront(n);
        break;
      case Queue::kProbation:
        Move(n, Queue::kProtected);
        DemoteProtectedOverflow();
        break;
      case Queue::kProtected:
        protected_.MoveToFront(n);
        break;
    }
  }

  // Keeps the protected segment within its share by demoting its LRU entries to probation.
  void DemoteProtectedOverflow() DAIS_REQUIRES(mu_) {
    while (protected_bytes_ > protected_capacity_) {
      Node* n = protected_.back();
      if (n == nullptr) break;
      Move(n, Queue::kProbation);
    }
  }

  // The main region's eviction victim: probation's LRU entry unless it is a pending candidate
  // (candidates sit in front of every other probation entry), then protected's, then window's.
  Node* Victim() DAIS_REQUIRES(mu_) {
    Node* v = probation_.back();
    if (v != nullptr && !v->candidate) return v;
    if ((v = protected_.back()) != nullptr) return v;
    return window_.back();
  }

  // While the shard is over capacity, pits the oldest pending candidate against the victim:
  // the one with the lower sketch estimate goes (a tie evicts the candidate, TinyLFU's rule).
  // An expired entry always goes first.
  void EvictFromMain(const std::vector<Node*>& candidates, uint64_t now_ns) DAIS_REQUIRES(mu_) {
    size_t ci = 0;
    while (total_bytes() > capacity_) {
      Node* candidate = ci < candidates.size() ? candidates[ci] : nullptr;
      Node* victim = Victim();
      if (victim == nullptr) {
        // Only candidates are left (the window holds nothing): drop the oldest.
        if (candidate == nullptr) {
          DAIS_BUG("L1 shard over capacity with no entries: {} bytes", total_bytes());
          break;
        }
        ++evictions_;
        Remove(candidate);
        ++ci;
        continue;
      }
      if (candidate == nullptr || now_ns >= victim->deadline_ns) {
        if (now_ns >= victim->deadline_ns) {
          ++expirations_;
        } else {
          ++evictions_;
        }
        Remove(victim);
        continue;
      }
      if (now_ns >= candidate->deadline_ns) {
        ++expirations_;
        Remove(candidate);
        ++ci;
        continue;
      }
      if (sketch_->Estimate(candidate->hash()) > sketch_->Estimate(victim->hash())) {
        ++evictions_;
        Remove(victim);
      } else {
        ++rejections_;
        Remove(candidate);
        ++ci;
      }
    }
    for (; ci < candidates.size(); ++ci) candidates[ci]->candidate = false;
  }

  // Unlinks and frees `n`.
  void Remove(Node* n) DAIS_REQUIRES(mu_) {
    List::Unlink(n);
    BytesOf(n->queue) -= n->charge;
    nodes_.Erase(n);  // frees n: last
  }

  Node* Find(std::string_view key, uint64_t hash) DAIS_REQUIRES(mu_) {
    return nodes_.Find(key, hash);
  }

  mutable Mutex mu_;
  size_t capacity_ = 0;
  size_t window_capacity_ = 0;
  size_t protected_capacity_ = 0;
  List window_ DAIS_GUARDED_BY(mu_);
  List probation_ DAIS_GUARDED_BY(mu_);
  List protected_ DAIS_GUARDED_BY(mu_);
  size_t window_bytes_ DAIS_GUARDED_BY(mu_) = 0;
  size_t probation_bytes_ DAIS_GUARDED_BY(mu_) = 0;
  size_t protected_bytes_ DAIS_GUARDED_BY(mu_) = 0;
  NodeIndex nodes_ DAIS_GUARDED_BY(mu_);
  std::unique_ptr<FrequencySketch> sketch_ DAIS_PT_GUARDED_BY(mu_);
  uint64_t evictions_ DAIS_GUARDED_BY(mu_) = 0;
  uint64_t rejections_ DAIS_GUARDED_BY(mu_) = 0;
  uint64_t expirations_ DAIS_GUARDED_BY(mu_) = 0;
};

L1Cache::L1Cache(L1Options options) : capacity_bytes_(options.capacity_bytes) {
  num_shards_ = std::bit_ceil(static_cast<size_t>(std::max(options.shards, 1)));
  int bits = std::countr_zero(num_shards_);
  shard_shift_ = 64 - bits;
  shards_ = std::make_unique<Shard[]>(num_shards_);
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].Init(capacity_bytes_ / num_shards_);
}

L1Cache::~L1Cache() = default;

L1Cache::Shard& L1Cache::ShardFor(uint64_t hash) {
  // The top bits pick the shard; a 64-bit shift is undefined, hence the one-shard case.
  return shards_[num_shards_ == 1 ? 0 : static_cast<size_t>(hash >> shard_shift_)];
}

RecordPtr L1Cache::Get(std::string_view key, uint64_t now_ns) {
  return Get(key, HashOf(key), now_ns);
}

RecordPtr L1Cache::Get(std::string_view key, uint64_t hash, uint64_t now_ns) {
  return ShardFor(hash).Get(key, hash, now_ns);
}

bool L1Cache::Put(std::string_view key, RecordPtr record, uint64_t deadline_ns, uint64_t now_ns) {
  return Put(key, HashOf(key), std::move(record), deadline_ns, now_ns);
}

bool L1Cache::Put(std::string_view key, uint64_t hash, RecordPtr record, uint64_t deadline_ns,
                  uint64_t now_ns) {
  size_t charge = record == nullptr ? 0 : Charge(key, *record);
  return ShardFor(hash).Put(key, hash, std::move(record), charge, deadline_ns, now_ns);
}

void L1Cache::Erase(std::string_view key) { Erase(key, HashOf(key)); }

void L1Cache::Erase(std::string_view key, uint64_t hash) { ShardFor(hash).Erase(key, hash); }

void L1Cache::Clear() {
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].Clear();
}

size_t L1Cache::bytes() const {
  Shard::Stats s;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AddStats(&s);
  return s.bytes;
}

size_t L1Cache::entries() const {
  Shard::Stats s;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AddStats(&s);
  return s.entries;
}

uint64_t L1Cache::evictions() const {
  Shard::Stats s;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AddStats(&s);
  return s.evictions;
}

uint64_t L1Cache::rejections() const {
  Shard::Stats s;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AddStats(&s);
  return s.rejections;
}

uint64_t L1Cache::expirations() const {
  Shard::Stats s;
  for (size_t i = 0; i < num_shards_; ++i) shards_[i].AddStats(&s);
  return s.expirations;
}

}  // namespace dais::features
