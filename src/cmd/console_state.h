// What `dais console` shows (docs/console.md), kept current by two threads:
// - the control plane: a watch on etcd's /dais/ prefix; after a change (at most every
//   `settle` ms) the objects are read again, as `dais ctl get KIND -o json` reads them, into one
//   JSON document: nodes, deployments, instances, assignments, routes, rollouts, events (newest
//   500), collections, gateways;
// - the live figures: every `scrape_every` the registered gateways' and nodes' /metrics (and any
//   extra targets, e.g. `dais txn serve`), turned into time series per route and version
//   (requests/s, 5xx share, p50 and p99 from the duration histogram's buckets), the feature
//   store's miss ratio, Redis reachability, transactions in doubt, and the P1/P2 alerts the
//   design names (a route's p99 over 150 ms, feature misses over 5 %, a transaction in doubt for
//   a minute, a target that does not answer).
// Each change calls `publish(event, json)` ("state" or "metrics") from the thread that made it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "etcd/client.h"
#include "gateway/rollout.h"

namespace dais::gateway {
class UpstreamPool;
}
namespace dais::etcd {
class Watcher;
}

namespace dais::cmd {

// The figures of one node / txn scrape that the console shows (summed over the targets).
struct TargetFigures {
  double feature_values = 0, feature_present = 0;  // dais_feature_values_total
  double redis_reachable_min = -1;                 // min of dais_redis_reachable; -1: none
  double txn_in_doubt = 0;                         // dais_txn_in_doubt_transactions
  double txn_oldest_s = 0;                         // max dais_txn_in_doubt_oldest_age_seconds
};
// `s` as a JSON string literal, quotes and escapes included (the console writes its JSON by hand).
std::string JsonQuoted(const std::string& s);

// Sums what TargetFigures holds from one Prometheus text exposition into `f`.
void AddTargetFigures(const std::string& text, TargetFigures* f);

// One round of live figures, read from the targets' /metrics or from a Prometheus.
struct ConsoleSample {
  struct Figures {
    double rps = 0, error_rate = 0, p50_ms = -1, p99_ms = -1;  // -1: no request to measure
  };
  std::map<std::pair<std::string, std::string>, Figures> series;  // (route, version)
  TargetFigures figures;
  int targets_up = 0;
  std::vector<std::string> down;    // targets that did not answer, for people
  std::vector<std::string> alerts;  // JSON objects {"severity", "name", "text"} from Prometheus
  std::string source = "targets";   // or "prometheus"
};

// The same figures from a Prometheus's HTTP API at `address` (host:port): instant queries over
// the last 30 s (rate, histogram_quantile) and the alerts that fire there (its rule files, e.g.
// deploy/prometheus/dais-alerts.yml). Unavailable naming Prometheus when it does not answer.
StatusOr<ConsoleSample> QueryPrometheus(gateway::UpstreamPool& pool, const std::string& address,
                                        std::chrono::milliseconds timeout);

// The p-quantile (0..1) in ms of the requests counted by cumulative buckets (le in seconds ->
// count), interpolated linearly inside its bucket as Prometheus's histogram_quantile does;
// -1 when no request was counted.
double BucketQuantileMs(const std::map<double, double>& buckets, double q);

class ConsoleState {
 public:
  using Publish = std::function<void(const std::string& event, const std::string& json)>;
  struct Options {
    std::chrono::milliseconds scrape_every{1000};
    std::chrono::milliseconds settle{200};
    size_t points = 300;                     // kept per series (5 min at 1 s)
    std::vector<std::string> extra_targets;  // host:port serving /metrics
    double p1_p99_ms = 150;                  // the design's P1: p99 above this
    double p2_miss_ratio = 0.05;             // the design's P2: feature misses above this
    std::string prometheus;                  // host:port: read the figures there instead
  };
  ConsoleState(etcd::Client* etcd, Options options, Publish publish);
  ~ConsoleState();
  ConsoleState(const ConsoleState&) = delete;
  ConsoleState& operator=(const ConsoleState&) = delete;

  std::string State() const;
  std::string Metrics() const;

 private:
  struct Point {
    int64_t time_ms;
    double rps, error_rate, p50_ms, p99_ms;
  };
  void StateLoop();
  void ScrapeLoop();
  std::string BuildState();
  // One round of figures, from the targets (ScrapeTargets) or Prometheus, into the series.
  void ScrapeOnce(int64_t now_ms, double seconds);
  ConsoleSample ScrapeTargets(double seconds);
  std::string MetricsJson(int64_t now_ms, const ConsoleSample& sample) const DAIS_REQUIRES(mu_);
  std::map<std::string, std::string> Targets(bool gateways) const;
  std::map<std::string, std::string> Fetch(const std::map<std::string, std::string>& targets,
                                           std::vector<std::string>* down);

  etcd::Client* etcd_;
  const Options options_;
  const Publish publish_;
  std::unique_ptr<gateway::UpstreamPool> pool_;

  mutable Mutex mu_;
  CondVar changed_{&mu_};
  bool dirty_ DAIS_GUARDED_BY(mu_) = true;
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  std::string state_ DAIS_GUARDED_BY(mu_) = "{}";
  std::string metrics_ DAIS_GUARDED_BY(mu_) = "{}";
  // Last scrape per gateway address (for the deltas), and the series by (route, version).
  std::map<std::string, gateway::Scrape> last_;
  std::map<std::pair<std::string, std::string>, std::deque<Point>> series_ DAIS_GUARDED_BY(mu_);

  std::unique_ptr<etcd::Watcher> watch_;
  std::thread state_thread_, scrape_thread_;
};

}  // namespace dais::cmd
