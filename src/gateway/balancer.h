// Choosing a node for a request among the READY instances of a model version, and keeping score
// of the nodes:
//   - power of two choices on outstanding requests: two distinct candidates drawn at random, the
//     one with fewer requests in flight from this gateway wins (ties: the first drawn);
//   - outlier ejection: `eject_after` consecutive failures (a refused connection, a 5xx, a
//     timeout) eject a node for `base_ejection`, doubling on each ejection in a row up to
//     `max_ejection`; when the time is up it is admitted again, and a success resets its count;
//   - when every candidate is ejected the least recently ejected is used anyway (panic mode, as
//     Envoy does): traffic is never dropped only because all nodes had failures.
// Nodes are identified by name; their address comes with the candidate list.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace dais::gateway {

struct BalancerOptions {
  int eject_after = 5;
  std::chrono::milliseconds base_ejection{1000};
  std::chrono::milliseconds max_ejection{30000};
};

class Balancer {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Balancer(BalancerOptions options = {}) : options_(options) {}

  // One of `candidates` (node names), or empty when there are none; `random` is a uniformly
  // random number. Names in `exclude` (nodes already tried for this request) are skipped unless
  // nothing else is left.
  std::string Pick(const std::vector<std::string>& candidates, std::span<const std::string> exclude,
                   uint64_t random, Clock::time_point now);

  // Around each try: Start before sending, then Finish with the outcome. Finish returns true
  // when this failure ejected the node.
  void Start(const std::string& node);
  bool Finish(const std::string& node, bool ok, Clock::time_point now);

  // Forgets the nodes not in `live` (gone from the cluster) that have nothing in flight, so that
  // a cluster whose nodes come and go does not grow this table without bound.
  void Retain(const std::set<std::string>& live);

  int64_t Outstanding(const std::string& node) const;
  size_t tracked() const;
  bool Ejected(const std::string& node, Clock::time_point now) const;

 private:
  struct Node {
    int64_t outstanding = 0;
    int consecutive_failures = 0;
    int ejections_in_a_row = 0;
    Clock::time_point ejected_until{};
  };
  const BalancerOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Node> nodes_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::gateway
