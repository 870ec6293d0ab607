#include "gateway/balancer.h"

#include <algorithm>

namespace dais::gateway {

std::string Balancer::Pick(const std::vector<std::string>& candidates,
                           std::span<const std::string> exclude, uint64_t random,
                           Clock::time_point now) {
  if (candidates.empty()) return "";
  MutexLock l(&mu_);
  // Reused by each thread's picks (cleared, capacity kept): no allocation per request.
  thread_local std::vector<const std::string*> fresh, healthy;
  fresh.clear();
  healthy.clear();
  for (const std::string& c : candidates) {
    if (std::find(exclude.begin(), exclude.end(), c) != exclude.end()) continue;
    fresh.push_back(&c);
    if (nodes_[c].ejected_until <= now) healthy.push_back(&c);
  }
  if (fresh.empty()) {
    for (const std::string& c : candidates) fresh.push_back(&c);  // all tried: any will do
    for (const std::string& c : candidates) {
      if (nodes_[c].ejected_until <= now) healthy.push_back(&c);
    }
  }
  if (healthy.empty()) {  // panic: the one whose ejection ends first
    const std::string* best = fresh.front();
    for (const std::string* c : fresh) {
      if (nodes_[*c].ejected_until < nodes_[*best].ejected_until) best = c;
    }
    return *best;
  }
  if (healthy.size() == 1) return *healthy.front();
  const size_t n = healthy.size();
  const size_t a = random % n;
  size_t b = (random / n) % (n - 1);
  if (b >= a) ++b;
  const std::string& first = *healthy[a];
  const std::string& second = *healthy[b];
  return nodes_[second].outstanding < nodes_[first].outstanding ? second : first;
}

void Balancer::Retain(const std::set<std::string>& live) {
  MutexLock l(&mu_);
  std::erase_if(nodes_, [&live](const auto& entry) {
    return entry.second.outstanding == 0 && !live.count(entry.first);
  });
}

size_t Balancer::tracked() const {
  MutexLock l(&mu_);
  return nodes_.size();
}

void Balancer::Start(const std::string& node) {
  MutexLock l(&mu_);
  ++nodes_[node].outstanding;
}

bool Balancer::Finish(const std::string& node, bool ok, Clock::time_point now) {
  MutexLock l(&mu_);
  Node& n = nodes_[node];
  --n.outstanding;
  if (ok) {
    n.consecutive_failures = 0;
    if (n.ejected_until <= now) n.ejections_in_a_row = 0;
    return false;
  }
  if (++n.consecutive_failures < options_.eject_after || n.ejected_until > now) return false;
  const auto length =
      std::min(options_.base_ejection * (int64_t{1} << std::min(n.ejections_in_a_row, 20)),
               options_.max_ejection);
  n.ejected_until = now + length;
  ++n.ejections_in_a_row;
  n.consecutive_failures = 0;
  return true;
}

int64_t Balancer::Outstanding(const std::string& node) const {
  MutexLock l(&mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.outstanding;
}

bool Balancer::Ejected(const std::string& node, Clock::time_point now) const {
  MutexLock l(&mu_);
  auto it = nodes_.find(node);
  return it != nodes_.end() && it->second.ejected_until > now;
}

}  // namespace dais::gateway
