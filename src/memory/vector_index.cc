#include "memory/vector_index.h"

#include <hnswlib/hnswlib.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

#include "memory/distance.h"

namespace dais::memory {
namespace {

// hnswlib's space interface over our run-time-dispatched kernels (distance.h).
// `bytes` per point in the graph: the float vector, or its SQ8 code.
class KernelSpace : public hnswlib::SpaceInterface<float> {
 public:
  KernelSpace(size_t bytes, size_t dimension, DistanceFn fn)
      : bytes_(bytes), dimension_(dimension), fn_(fn) {}
  size_t get_data_size() override { return bytes_; }
  hnswlib::DISTFUNC<float> get_dist_func() override { return fn_; }
  void* get_dist_func_param() override { return &dimension_; }

 private:
  size_t bytes_;
  size_t dimension_;
  DistanceFn fn_;
};

}  // namespace

class VectorIndex::Impl {
 public:
  Impl(int dimension, Metric metric, IndexParams params, size_t capacity)
      : metric_(metric), params_(params), dimension_(dimension) {
    const DistanceKernels& kernels = BestDistanceKernels();
    if (kernels.squared_l2 == nullptr) {  // DAIS_MEMORY_SIMD=hnswlib (distance.h): no SQ8 either
      space_ = metric == Metric::kL2 ? std::unique_ptr<hnswlib::SpaceInterface<float>>(
                                           std::make_unique<hnswlib::L2Space>(dimension))
                                     : std::make_unique<hnswlib::InnerProductSpace>(dimension);
    } else if (params.quantization == Quantization::kSq8) {
      sq8_ = true;
      exact_ = metric == Metric::kL2 ? kernels.squared_l2 : kernels.inner_product_distance;
      space_ = std::make_unique<KernelSpace>(
          Sq8Bytes(dimension), dimension,
          metric == Metric::kL2 ? kernels.sq8_squared_l2 : kernels.sq8_inner_product_distance);
    } else {
      space_ = std::make_unique<KernelSpace>(
          dimension * sizeof(float), dimension,
          metric == Metric::kL2 ? kernels.squared_l2 : kernels.inner_product_distance);
    }
    graph_ = std::make_unique<hnswlib::HierarchicalNSW<float>>(
        space_.get(), std::max<size_t>(capacity, 16), params.m, params.ef_construction);
    graph_->setEf(params.ef_search);
    AdviseHugePages();
  }

  float Score(float distance) const {
    // hnswlib's distances: squared L2; 1 - dot product for the inner product space.
    return metric_ == Metric::kL2 ? std::sqrt(std::max(distance, 0.0f)) : 1.0f - distance;
  }

  void Upsert(uint64_t label, const float* v) {
    std::unique_lock lock(mu_);
    const bool known = graph_->label_lookup_.count(label) != 0;
    if (!known && graph_->cur_element_count >= graph_->max_elements_) {
      Grow(graph_->max_elements_ + graph_->max_elements_ / 2);
    }
    if (sq8_) EnsureFloatSlots(label);
    Add(v, label);
    if (!known || deleted_.erase(label) != 0) ++live_;  // new, or back from removal
  }

  void UpsertMany(const std::vector<std::pair<uint64_t, const float*>>& points, int threads) {
    std::unique_lock lock(mu_);
    // Updates and repeated labels first, one by one; then the new labels in parallel.
    std::vector<std::pair<uint64_t, const float*>> fresh;
    std::unordered_set<uint64_t> seen;
    if (sq8_ && !points.empty()) {
      EnsureFloatSlots(std::max_element(points.begin(), points.end())->first);
    }
    for (auto it = points.rbegin(); it != points.rend(); ++it) {  // the last vector of a label wins
      if (!seen.insert(it->first).second) continue;
      if (graph_->label_lookup_.count(it->first) != 0) {
        Add(it->second, it->first);
        if (deleted_.erase(it->first) != 0) ++live_;
      } else {
        fresh.push_back(*it);
      }
    }
    if (graph_->cur_element_count + fresh.size() > graph_->max_elements_) {
      Grow(std::max(graph_->max_elements_ + graph_->max_elements_ / 2,
                    graph_->cur_element_count + fresh.size()));
    }
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < fresh.size();) Add(fresh[i].second, fresh[i].first);
    };
    const int n = fresh.size() < 256 ? 1 : std::max(1, threads);
    std::vector<std::thread> helpers;
    for (int t = 1; t < n; ++t) helpers.emplace_back(work);
    work();
    for (auto& t : helpers) t.join();
    live_ += fresh.size();
  }

  void Remove(uint64_t label) {
    std::unique_lock lock(mu_);
    auto it = graph_->label_lookup_.find(label);
    if (it == graph_->label_lookup_.end() || graph_->isMarkedDeleted(it->second)) return;
    graph_->markDelete(label);
    deleted_.insert(label);
    --live_;
  }

  std::vector<Hit> Search(const float* q, size_t k, const std::function<bool(uint64_t)>& keep,
                          size_t max_candidates, bool* exhausted, size_t ef) const {
    std::shared_lock lock(mu_);
    std::vector<Hit> out;
    if (exhausted != nullptr) *exhausted = false;
    if (live_ == 0 || k == 0) return out;
    // Asking hnswlib for `fetch` results searches with max(ef_search, fetch) candidates: a larger
    // fetch cut to k is a search with that ef.
    size_t fetch = std::max(keep ? std::max<size_t>(k * 4, 64) : k, ef);
    std::vector<char> code;
    if (sq8_) {
      code.resize(Sq8Bytes(dimension_));
      Sq8Encode(q, dimension_, code.data());
      // Every candidate of the graph's search is re-ranked by its float vector.
      fetch = std::max<size_t>(fetch, params_.ef_search);
    }
    for (;;) {
      fetch = std::min(fetch, live_);
      auto top = graph_->searchKnn(sq8_ ? static_cast<const void*>(code.data()) : q, fetch);
      out.clear();
      const size_t found = top.size();
      std::vector<Hit> all(found);
      for (size_t i = found; i-- > 0;) {  // the queue pops the worst first
        all[i] = {top.top().second, top.top().first};
        top.pop();
      }
      if (sq8_) {
        ReRank(q, &all);
        std::sort(all.begin(), all.end(), [](const Hit& a, const Hit& b) {
          return a.score < b.score || (a.score == b.score && a.label < b.label);
        });
      }
      for (Hit& h : all) h.score = Score(h.score);
      for (const Hit& h : all) {
        if (keep && !keep(h.label)) continue;
        out.push_back(h);
        if (out.size() == k) return out;
      }
      if (!keep) return out;
      if (fetch >= live_ || found < fetch) return out;  // every live point was a candidate
      if (fetch >= max_candidates) {
        if (exhausted != nullptr) *exhausted = true;
        return out;
      }
      fetch *= 4;
    }
  }

  std::vector<float> Vector(uint64_t label) const {
    std::shared_lock lock(mu_);
    auto it = graph_->label_lookup_.find(label);
    if (it == graph_->label_lookup_.end() || graph_->isMarkedDeleted(it->second)) return {};
    if (sq8_) {
      const float* v = floats_.data() + label * dimension_;
      return std::vector<float>(v, v + dimension_);
    }
    return graph_->getDataByLabel<float>(label);
  }

  std::vector<Hit> ScoreLabels(const float* q, const std::vector<uint64_t>& labels) const {
    std::shared_lock lock(mu_);
    std::vector<Hit> out;
    out.reserve(labels.size());
    auto dist = space_->get_dist_func();
    void* param = space_->get_dist_func_param();
    for (uint64_t label : labels) {
      auto it = graph_->label_lookup_.find(label);
      if (it == graph_->label_lookup_.end() || graph_->isMarkedDeleted(it->second)) continue;
      out.push_back({label, Score(sq8_ ? ExactDistance(q, label)
                                       : dist(q, graph_->getDataByInternalId(it->second), param))});
    }
    return out;
  }

  size_t size() const {
    std::shared_lock lock(mu_);
    return live_;
  }

  size_t memory_bytes() const {
    std::shared_lock lock(mu_);
    // Level 0 (links + vector + label per slot), the upper levels' link lists, the label map.
    size_t bytes = graph_->max_elements_ * graph_->size_data_per_element_;
    for (size_t i = 0; i < graph_->cur_element_count; ++i) {
      bytes += static_cast<size_t>(graph_->element_levels_[i]) * graph_->size_links_per_element_;
    }
    bytes += graph_->label_lookup_.size() * (sizeof(uint64_t) + sizeof(uint32_t) + 16);
    return bytes + floats_.capacity() * sizeof(float);
  }

 private:
  // Inserts or replaces `label`'s vector in the graph (as its SQ8 code with sq8, the float
  // vector kept beside it; EnsureFloatSlots first). Safe on several threads for distinct labels.
  void Add(const float* v, uint64_t label) {
    if (!sq8_) {
      graph_->addPoint(v, label);
      return;
    }
    std::memcpy(floats_.data() + label * dimension_, v, dimension_ * sizeof(float));
    std::vector<char> code(Sq8Bytes(dimension_));
    Sq8Encode(v, dimension_, code.data());
    graph_->addPoint(code.data(), label);
  }

  // The float vectors are by label (the shard's labels are dense); grown by half when short.
  void EnsureFloatSlots(uint64_t label) {
    const size_t need = (label + 1) * dimension_;
    if (floats_.size() >= need) return;
    if (need > floats_.capacity()) {
      floats_.reserve(std::max(need, floats_.capacity() + floats_.capacity() / 2));
    }
    floats_.resize(need);
  }

  // Each candidate's exact distance to `q` by its float vector. The vectors lie at random places
  // (a million is 512 MB): each is asked for a few candidates ahead of its distance, so that
  // their cache misses overlap instead of following one another.
  void ReRank(const float* q, std::vector<Hit>* hits) const {
    constexpr size_t kAhead = 4;
    const size_t bytes = dimension_ * sizeof(float);
    auto prefetch = [&](uint64_t label) {
      const char* p = reinterpret_cast<const char*>(floats_.data() + label * dimension_);
      for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
    };
    for (size_t i = 0; i < std::min(kAhead, hits->size()); ++i) prefetch((*hits)[i].label);
    for (size_t i = 0; i < hits->size(); ++i) {
      if (i + kAhead < hits->size()) prefetch((*hits)[i + kAhead].label);
      (*hits)[i].score = ExactDistance(q, (*hits)[i].label);
    }
  }

  // The exact distance (hnswlib's convention, as the graph's) to `label`'s float vector.
  float ExactDistance(const float* q, uint64_t label) const {
    size_t dimension = dimension_;
    return exact_(q, floats_.data() + label * dimension_, &dimension);
  }

  void Grow(size_t capacity) {
    graph_->resizeIndex(capacity);
    AdviseHugePages();
  }

  // Level 0 holds every slot's links and vector; a search visits a few hundred slots at random,
  // so with 4 KiB pages each hop is a TLB miss as well as a cache miss (a million 128-d vectors
  // is 650 MiB). Move it to a 2 MiB-aligned block advised for transparent huge pages, which
  // Linux's default THP mode ("madvise") gives only when asked; hnswlib's realloc would move the
  // block to an address that splits them. The block stays malloc's (hnswlib frees it), and
  // hnswlib's next realloc to a size it holds keeps it in place. Small indexes stay as they are.
  void AdviseHugePages() {
#ifdef MADV_HUGEPAGE
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = graph_->max_elements_ * graph_->size_data_per_element_;
    if (bytes < 4 * kHuge) return;
    void* block = nullptr;
    if (posix_memalign(&block, kHuge, bytes) != 0) return;  // stay on the small pages
    madvise(block, bytes & ~(kHuge - 1), MADV_HUGEPAGE);    // advice: an error changes nothing
    std::memcpy(block, graph_->data_level0_memory_,
                graph_->cur_element_count * graph_->size_data_per_element_);
    std::free(graph_->data_level0_memory_);
    graph_->data_level0_memory_ = static_cast<char*>(block);
#endif
  }

  const Metric metric_;
  const IndexParams params_;
  const size_t dimension_;
  bool sq8_ = false;
  DistanceFn exact_ = nullptr;  // the float kernel, for re-ranking (sq8)
  std::vector<float> floats_;   // sq8: the float vectors, `dimension_` per label
  std::unique_ptr<hnswlib::SpaceInterface<float>> space_;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph_;
  mutable std::shared_mutex mu_;
  size_t live_ = 0;
  std::unordered_set<uint64_t> deleted_;  // removed labels still in the graph
};

VectorIndex::VectorIndex(int dimension, Metric metric, IndexParams params, size_t capacity)
    : dimension_(dimension), impl_(std::make_unique<Impl>(dimension, metric, params, capacity)) {}
VectorIndex::~VectorIndex() = default;

void VectorIndex::Upsert(uint64_t label, const float* vector) { impl_->Upsert(label, vector); }
void VectorIndex::UpsertMany(const std::vector<std::pair<uint64_t, const float*>>& points,
                             int threads) {
  impl_->UpsertMany(points, threads);
}
void VectorIndex::Remove(uint64_t label) { impl_->Remove(label); }
std::vector<VectorIndex::Hit> VectorIndex::Search(const float* query, size_t k,
                                                  const std::function<bool(uint64_t)>& keep,
                                                  size_t max_candidates, bool* exhausted,
                                                  size_t ef) const {
  return impl_->Search(query, k, keep, max_candidates, exhausted, ef);
}
std::vector<float> VectorIndex::Vector(uint64_t label) const { return impl_->Vector(label); }
std::vector<VectorIndex::Hit> VectorIndex::Score(const float* query,
                                                 const std::vector<uint64_t>& labels) const {
  return impl_->ScoreLabels(query, labels);
}
size_t VectorIndex::size() const { return impl_->size(); }
size_t VectorIndex::memory_bytes() const { return impl_->memory_bytes(); }

}  // namespace dais::memory
