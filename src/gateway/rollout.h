// Progressive delivery of a route's new version (docs/gateway.md, "Rollouts"): the canary's
// weight steps up (5, 25, 50, 100 %), each step analysed on what the gateways measured for the
// canary since the step began; a step whose error rate or p99 latency passes its limit rolls the
// route back to the stable version at once, a step that held for its interval moves on, and the
// last one promotes the canary to stable. Kept in etcd at /dais/rollouts/<route> (JSON), written
// by `dais ctl rollout start` and then only by the leading scheduler's RolloutController, so a
// gateway restart or a scheduler failover loses nothing.
//
// This file is the pure part: the record, its JSON, the decision, and the figures computed from
// two scrapes of the gateways' Prometheus metrics. Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dais/status.h"
#include "gateway/route.h"

namespace dais::gateway {

inline constexpr const char* kRolloutsPrefix = "/dais/rollouts/";
inline constexpr const char* kGatewaysPrefix = "/dais/gateways/";

struct Rollout {
  std::string route;
  int64_t from = 0;                           // the stable version when the rollout started
  int64_t to = 0;                             // the canary
  std::vector<int> steps = {5, 25, 50, 100};  // the canary's weight per step, increasing
  int64_t interval_ms = 30000;
  double max_error_rate = 0.01;  // share of 5xx answers
  double max_p99_ms = 0;         // 0: latency not checked
  int64_t min_requests = 20;     // fewer in a step: not judged yet
  // Model quality: the population stability index of the canary's scores against the stable
  // version's over the same step (the nodes' dais_inference_score); above it, rolled back.
  // 0: scores not compared.
  double max_psi = 0;
  // Live accuracy: with a label name, the canary's accuracy on the labels of its own answers
  // (`dais scheduler --feedback-stream/--label-stream`: predictions joined with the labels posted
  // for them) minus the stable version's, over the same step, must be at least
  // min_accuracy_delta (e.g. -0.01: at most a point worse). Empty: accuracy not compared.
  std::string accuracy_label;
  double min_accuracy_delta = 0;
  // "running", "paused" (dais ctl rollout pause: not analysed), "promoted" (by the analysis or
  // dais ctl rollout promote), "rolled_back" (by the analysis), "aborted" (dais ctl rollback).
  std::string state = "running";
  int step = 0;
  int64_t step_started_ms = 0;  // Unix time
  std::string reason;
  struct Record {
    int step = 0;
    int weight = 0;
    int64_t requests = 0;
    double error_rate = 0;
    double p99_ms = 0;
    double psi = -1;             // -1: not measured
    double accuracy_delta = -2;  // canary - stable; -2: not measured
    std::string decision;
    int64_t time_ms = 0;
  };
  std::vector<Record> history;

  std::string ToJson() const;
};

// InvalidArgument naming the field (steps not increasing or not ending at 100, limits out of
// range...).
StatusOr<Rollout> RolloutFromJson(const std::string& json);
Status ValidateRollout(const Rollout& r);

// The route with the canary at `canary_weight` % (the stable version keeps the rest, the canary
// listed last so sticky users already on it stay: route.h).
RouteSpec RouteAtWeight(const RouteSpec& route, int64_t stable, int64_t canary, int canary_weight);

// What the gateways measured for one route version between two scrapes.
struct Figures {
  int64_t requests = 0;
  int64_t errors = 0;  // 5xx answers
  double p99_ms = 0;   // from the duration histogram's buckets (upper bound of the bucket)
  // The scores' population stability index, canary against stable, when both answered at least
  // min_requests scored rows in the step; -1 otherwise.
  double psi = -1;
  int64_t canary_scores = 0, stable_scores = 0;
  // Live accuracy (labelled answers of each version in the step; accuracies -1 until both have
  // min_requests labelled answers).
  int64_t canary_labeled = 0, stable_labeled = 0;
  double canary_accuracy = -1, stable_accuracy = -1;
  bool accuracy_measured() const { return canary_accuracy >= 0 && stable_accuracy >= 0; }
  double error_rate() const { return requests > 0 ? double(errors) / double(requests) : 0; }
};

// The counters of one scrape that the analysis uses: per (route, version), requests by code
// and the duration histogram's cumulative buckets.
struct Scrape {
  struct Series {
    std::map<std::string, double> by_code;  // code -> requests
    std::map<double, double> buckets;       // le -> cumulative count
  };
  std::map<std::pair<std::string, std::string>, Series> series;  // (route, version)
  // The nodes' dais_inference_score buckets: (model, version) -> le -> cumulative count.
  std::map<std::pair<std::string, std::string>, std::map<double, double>> scores;
};
// Parses the Prometheus text exposition of a gateway or a node (only
// dais_gateway_requests_total, dais_gateway_request_duration_seconds_bucket and
// dais_inference_score_bucket are kept); malformed lines are skipped.
Scrape ParseGatewayMetrics(const std::string& text);
// Adds `b` into `a` (several gateways).
void Merge(Scrape* a, const Scrape& b);
Figures Delta(const Scrape& before, const Scrape& after, const std::string& route, int64_t version);
// What one gateway counted between two of its scrapes, series by series; a counter that went
// down was reset (the gateway restarted): its new value is what it counted since, as
// Prometheus's increase() takes it.
Scrape DeltaScrape(const Scrape& before, const Scrape& after);
// True when any counter or bucket of `after` is below `before`'s: the process restarted (its
// counters began again at zero), so what it counted since `before` is all of `after`.
bool WentDown(const Scrape& before, const Scrape& after);

// How finely the gateways' latency buckets (dais_gateway_request_duration_seconds, FineLatency-
// Buckets) resolve a p99 limit. The gateway's own analysis reads a p99 as the upper bound of its
// bucket and Prometheus's histogram_quantile interpolates inside it, so a limit is judged exactly
// only when it is a bucket bound; inside a bucket (lower, upper] every p99 in that bucket reads
// the same. `resolved` is false when the limit lies outside the buckets' range (below the first
// bound or above the last) or in a bucket wider than a factor of 1.25.
struct LimitResolution {
  double lower_ms = 0;  // the bucket holding the limit: (lower_ms, upper_ms]
  double upper_ms = 0;  // +Inf above the last bound
  bool exact = false;   // the limit is a bound
  bool resolved = false;
  // "a bucket bound", "between the bounds 25 and 30 ms", "above the last bound (10000 ms)".
  std::string Describe() const;
};
LimitResolution ResolveP99Limit(double limit_ms);
LimitResolution ResolveP99Limit(double limit_ms, const std::vector<double>& bounds_seconds);

// The population stability index of two histograms given as cumulative buckets (le -> count):
// sum over the bins of (a - b) ln(a / b), a and b the bins' shares (a share of 0 counts as
// 0.0001, so one empty bin does not make it infinite). Below 0.1: the same population; above
// 0.25: a shifted one (the usual reading). `*na` / `*nb`: the observations in each.
double Psi(const std::map<double, double>& a, const std::map<double, double>& b, int64_t* na,
           int64_t* nb);
// Sets f->psi (and the counts) from the score buckets in `since` for `model`'s canary and
// stable versions: measured when both have at least `min_requests` scored rows.
// Live accuracy: the answers of one version made since a step began whose label arrived, and
// how many of them were right (a score >= 0.5 for a label >= 0.5, or both below).
struct LabelledAnswers {
  int64_t labeled = 0, correct = 0;
};
struct AccuracyQuery {
  std::string model;  // the route's model
  int64_t canary = 0, stable = 0;
  std::string label;     // the label's name
  int64_t since_ms = 0;  // the step's start: answers before it do not count
};
// Where the controller gets them (cmd/scheduler.cc joins the feedback and label streams,
// streams/live_accuracy.h); by version.
using AccuracySource =
    std::function<StatusOr<std::map<int64_t, LabelledAnswers>>(const AccuracyQuery&)>;
// Into the figures; the accuracies only once both versions have min_requests labelled answers.
void AddAccuracy(const std::map<int64_t, LabelledAnswers>& counts, int64_t canary, int64_t stable,
                 int64_t min_requests, Figures* f);

void AddScores(const Scrape& since, const std::string& model, int64_t canary, int64_t stable,
               int64_t min_requests, Figures* f);

struct Decision {
  enum Kind { kWait, kNext, kPromote, kRollBack } kind = kWait;
  std::string reason;
};
// A bad step rolls back as soon as it has min_requests; a good one moves on once its interval
// has passed; the last good step promotes; too few requests at the end of the interval: wait.
Decision Decide(const Rollout& r, const Figures& f, int64_t now_ms);

}  // namespace dais::gateway
