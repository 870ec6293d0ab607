#include "memory/shard.h"

#include <algorithm>
#include <mutex>
#include <string_view>
#include <thread>
#include <tuple>

namespace dais::memory {
namespace {

// Candidates the graph may look at for a filtered search before the shard scores exactly.
constexpr size_t kMaxGraphCandidates = 4096;

size_t PayloadBytes(const Payload& p) {
  size_t n = 0;
  for (const auto& [name, value] : p) {
    n += name.size() + sizeof(FieldValue);
    if (const auto* s = std::get_if<std::string>(&value)) n += s->size();
  }
  return n;
}

bool WithinThreshold(Metric metric, const std::optional<double>& threshold, float score) {
  if (!threshold) return true;
  return HigherIsBetter(metric) ? score >= *threshold : score <= *threshold;
}

}  // namespace

bool Better(Metric metric, float a, float b) { return HigherIsBetter(metric) ? a > b : a < b; }

Shard::Shard(CollectionSpecPtr spec, int index, size_t initial_capacity, int insert_threads)
    : spec_(std::move(spec)),
      index_(index),
      threads_(insert_threads > 0
                   ? insert_threads
                   : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      index_graph_(spec_->dimension, spec_->metric, spec_->index, initial_capacity) {}

bool Shard::Newer(const std::string& id, uint64_t seq) const {
  // A write seen again (the replication log replays this replica's own writes) changes nothing.
  if (auto it = labels_.find(id); it != labels_.end()) return seq > slots_[it->second].seq;
  if (auto it = tombstones_.find(id); it != tombstones_.end()) return seq > it->second.seq;
  return true;
}

template <typename PointAt>
void Shard::UpsertLocked(size_t n, const PointAt& get) {
  std::vector<std::pair<uint64_t, const float*>> vectors;
  vectors.reserve(n);
  // An id given twice in one write: its last point is the one written.
  std::unordered_map<std::string_view, size_t> last;
  if (n > 1) {
    for (size_t i = 0; i < n; ++i) last[std::get<0>(get(i))->id] = i;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto [p, expires_ms, seq] = get(i);
    if ((n > 1 && last[p->id] != i) || !Newer(p->id, seq)) continue;
    tombstones_.erase(p->id);
    uint64_t label;
    if (auto it = labels_.find(p->id); it != labels_.end()) {
      label = it->second;
    } else if (!free_labels_.empty()) {
      label = free_labels_.back();
      free_labels_.pop_back();
      labels_.emplace(p->id, label);
    } else {
      label = slots_.size();
      slots_.emplace_back();
      labels_.emplace(p->id, label);
    }
    Slot& s = slots_[label];
    payload_bytes_ -= s.live ? PayloadBytes(s.payload) + s.id.size() : 0;
    s = Slot{p->id, p->payload, expires_ms, seq, true};
    if (expires_ms != 0 && (next_expiry_ms_ == 0 || expires_ms < next_expiry_ms_)) {
      next_expiry_ms_ = expires_ms;
    }
    if (expires_ms != 0 && (written_expiry_ms_ == 0 || expires_ms < written_expiry_ms_)) {
      written_expiry_ms_ = expires_ms;
    }
    payload_bytes_ += PayloadBytes(s.payload) + s.id.size();
    vectors.emplace_back(label, p->vector.data());
  }
  index_graph_.UpsertMany(vectors, threads_);
}

void Shard::Upsert(const std::vector<Point>& points, int64_t expires_ms, uint64_t seq) {
  std::unique_lock lock(mu_);
  UpsertLocked(points.size(), [&](size_t i) { return std::tuple(&points[i], expires_ms, seq); });
}

void Shard::Restore(const std::vector<StoredPoint>& points) {
  std::unique_lock lock(mu_);
  UpsertLocked(points.size(), [&](size_t i) {
    return std::tuple(&points[i].point, points[i].expires_ms, points[i].seq);
  });
}

void Shard::RemoveLocked(uint64_t label, uint64_t seq, int64_t now_ms) {
  Slot& s = slots_[label];
  payload_bytes_ -= PayloadBytes(s.payload) + s.id.size();
  index_graph_.Remove(label);
  labels_.erase(s.id);
  tombstones_[s.id] = Tombstone{seq, now_ms};
  s = Slot{};
  free_labels_.push_back(label);
}

void Shard::Delete(const std::vector<std::string>& ids, uint64_t seq, int64_t now_ms) {
  std::unique_lock lock(mu_);
  for (const std::string& id : ids) {
    if (auto it = labels_.find(id); it != labels_.end()) {
      if (seq >= slots_[it->second].seq) RemoveLocked(it->second, seq, now_ms);
    } else if (auto t = tombstones_.find(id); t == tombstones_.end() || t->second.seq < seq) {
      tombstones_[id] = Tombstone{seq, now_ms};  // a delete that overtook its upsert
    }
  }
}

void Shard::Clear() {
  std::unique_lock lock(mu_);
  for (uint64_t l = 0; l < slots_.size(); ++l) {
    if (!slots_[l].live) continue;
    index_graph_.Remove(l);
    slots_[l] = Slot{};
    free_labels_.push_back(l);
  }
  labels_.clear();
  tombstones_.clear();
  payload_bytes_ = 0;
}

bool Shard::Keep(uint64_t label, const Filter& filter, int64_t now_ms) const {
  if (label >= slots_.size()) return false;
  const Slot& s = slots_[label];
  if (!s.live || (s.expires_ms != 0 && s.expires_ms <= now_ms)) return false;
  return filter.empty() || Matches(filter, s.payload);
}

std::vector<VectorIndex::Hit> Shard::ExactSearch(const SearchRequest& r, int64_t now_ms) const {
  std::vector<uint64_t> labels;
  for (uint64_t l = 0; l < slots_.size(); ++l) {
    if (Keep(l, r.filter, now_ms)) labels.push_back(l);
  }
  auto hits = index_graph_.Score(r.vector.data(), labels);
  const Metric m = spec_->metric;
  const size_t k = std::min<size_t>(r.k, hits.size());
  std::partial_sort(hits.begin(), hits.begin() + k, hits.end(),
                    [m](const auto& a, const auto& b) { return Better(m, a.score, b.score); });
  hits.resize(k);
  return hits;
}

std::vector<SearchHit> Shard::Search(const SearchRequest& r, int64_t now_ms) const {
  std::shared_lock lock(mu_);
  // Every point passes the check (expiry at least), so the graph never answers with an expired
  // point in place of a live one.
  auto keep = [&](uint64_t label) { return Keep(label, r.filter, now_ms); };
  bool exhausted = false;
  auto hits = index_graph_.Search(r.vector.data(), r.k, keep, kMaxGraphCandidates, &exhausted,
                                  static_cast<size_t>(r.ef));
  if (exhausted) {
    exact_searches_.fetch_add(1, std::memory_order_relaxed);
    hits = ExactSearch(r, now_ms);
  }
  std::vector<SearchHit> out;
  out.reserve(hits.size());
  for (const auto& h : hits) {
    if (!WithinThreshold(spec_->metric, r.threshold, h.score)) break;  // best first
    const Slot& s = slots_[h.label];
    SearchHit hit{s.id, h.score, {}, {}};
    if (r.with_payload) hit.payload = s.payload;
    if (r.with_vector) hit.vector = index_graph_.Vector(h.label);
    out.push_back(std::move(hit));
  }
  return out;
}

std::optional<SearchHit> Shard::Get(const std::string& id, bool with_vector, int64_t now_ms) const {
  std::shared_lock lock(mu_);
  auto it = labels_.find(id);
  if (it == labels_.end() || !Keep(it->second, {}, now_ms)) return std::nullopt;
  const Slot& s = slots_[it->second];
  SearchHit hit{s.id, 0, s.payload, {}};
  if (with_vector) hit.vector = index_graph_.Vector(it->second);
  return hit;
}

std::vector<std::string> Shard::Expire(int64_t now_ms) {
  std::vector<uint64_t> expired;
  int64_t next = 0;  // the earliest expiry not yet due among the slots scanned
  {
    std::shared_lock lock(mu_);
    // A million slots are ~100 MB to read: not every second when nothing can be due.
    const bool due = next_expiry_ms_ != 0 && next_expiry_ms_ <= now_ms;
    if (!due && tombstones_.empty()) return {};
    if (due) {
      for (uint64_t l = 0; l < slots_.size(); ++l) {
        const Slot& s = slots_[l];
        if (!s.live || s.expires_ms == 0) continue;
        if (s.expires_ms <= now_ms) {
          expired.push_back(l);
        } else if (next == 0 || s.expires_ms < next) {
          next = s.expires_ms;
        }
      }
    }
  }
  std::unique_lock lock(mu_);
  if (next_expiry_ms_ != 0 && next_expiry_ms_ <= now_ms) {
    // Scanned: the next expiry is the scan's, or an earlier one written since (which lowered
    // written_expiry_ms_; a stale one only costs another scan).
    next_expiry_ms_ = next;
    if (written_expiry_ms_ != 0 && (next_expiry_ms_ == 0 || written_expiry_ms_ < next_expiry_ms_)) {
      next_expiry_ms_ = written_expiry_ms_;
    }
  }
  written_expiry_ms_ = 0;
  std::vector<std::string> ids;
  for (uint64_t l : expired) {
    Slot& s = slots_[l];
    if (!s.live || s.expires_ms == 0 || s.expires_ms > now_ms) continue;  // rewritten meanwhile
    ids.push_back(s.id);
    RemoveLocked(l, s.seq, now_ms);
  }
  std::erase_if(tombstones_,
                [now_ms](const auto& t) { return now_ms - t.second.at_ms > kTombstoneWindowMs; });
  return ids;
}

std::vector<StoredPoint> Shard::Snapshot() const {
  std::shared_lock lock(mu_);
  std::vector<StoredPoint> out;
  out.reserve(labels_.size());
  for (uint64_t l = 0; l < slots_.size(); ++l) {
    const Slot& s = slots_[l];
    if (!s.live) continue;
    out.push_back({Point{s.id, index_graph_.Vector(l), s.payload}, s.expires_ms, s.seq});
  }
  return out;
}

size_t Shard::size() const { return index_graph_.size(); }

size_t Shard::memory_bytes() const {
  std::shared_lock lock(mu_);
  return index_graph_.memory_bytes() + payload_bytes_ + slots_.capacity() * sizeof(Slot) +
         labels_.size() * (sizeof(uint64_t) + 48);
}

uint64_t Shard::exact_searches() const { return exact_searches_.load(std::memory_order_relaxed); }

}  // namespace dais::memory
