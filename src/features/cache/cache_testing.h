// Test and benchmark helpers for the feature caches (not linked into the server): a Zipf key
// generator and a plain byte-bounded LRU used as the baseline for hit ratios.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dais::features::testing {

// Ranks 0..n-1 with P(rank k) proportional to 1 / (k + 1)^s, by inverting the CDF.
class Zipf {
 public:
  Zipf(size_t n, double s) : cdf_(n) {
    double sum = 0;
    for (size_t k = 0; k < n; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), s);
      cdf_[k] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  template <typename Rng>
  size_t operator()(Rng& rng) {
    double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    size_t k = static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return std::min(k, cdf_.size() - 1);
  }

 private:
  std::vector<double> cdf_;
};

// Single-threaded LRU bounded by the sum of charges, evicting least recently used entries.
class ByteLru {
 public:
  explicit ByteLru(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  bool Get(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    order_.splice(order_.begin(), order_, it->second);
    return true;
  }
  void Put(const std::string& key, size_t charge) {
    auto it = map_.find(key);
    if (it != map_.end()) {
      bytes_ -= it->second->charge;
      order_.erase(it->second);
      map_.erase(it);
    }
    if (charge > capacity_) return;
    order_.push_front(Entry{key, charge});
    map_[key] = order_.begin();
    bytes_ += charge;
    while (bytes_ > capacity_) {
      const Entry& victim = order_.back();
      bytes_ -= victim.charge;
      map_.erase(victim.key);
      order_.pop_back();
    }
  }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string key;
    size_t charge;
  };
  size_t capacity_;
  size_t bytes_ = 0;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> map_;
};

}  // namespace dais::features::testing
