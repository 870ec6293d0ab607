#include "gateway/rollout.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::gateway {
namespace {

Rollout Running() {
  Rollout r;
  r.route = "ranker";
  r.from = 1;
  r.to = 2;
  r.steps = {10, 50, 100};
  r.interval_ms = 1000;
  r.max_error_rate = 0.05;
  r.max_p99_ms = 100;
  r.min_requests = 20;
  r.step_started_ms = 10000;
  return r;
}

constexpr const char* kScrapeA = R"(# HELP dais_gateway_requests_total x
# TYPE dais_gateway_requests_total counter
dais_gateway_requests_total{route="ranker",version="2",tenant="a",code="200"} 100
dais_gateway_requests_total{route="ranker",version="2",tenant="a",code="503"} 1
dais_gateway_requests_total{route="ranker",version="1",tenant="a",code="200"} 900
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="0.01"} 90
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="0.05"} 100
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="+Inf"} 101
garbage line {
)";
constexpr const char* kScrapeB =
    R"(dais_gateway_requests_total{route="ranker",version="2",tenant="a",code="200"} 180
dais_gateway_requests_total{route="ranker",version="2",tenant="a",code="503"} 21
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="0.01"} 100
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="0.05"} 150
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="0.25"} 200
dais_gateway_request_duration_seconds_bucket{route="ranker",version="2",le="+Inf"} 201
)";

TEST(RolloutTest, FiguresAreTheDeltaBetweenScrapes) {
  const Scrape a = ParseGatewayMetrics(kScrapeA);
  const Scrape b = ParseGatewayMetrics(kScrapeB);
  const Figures f = Delta(a, b, "ranker", 2);
  EXPECT_EQ(f.requests, 100);  // 80 OK + 20 errors
  EXPECT_EQ(f.errors, 20);
  EXPECT_DOUBLE_EQ(f.error_rate(), 0.2);
  EXPECT_DOUBLE_EQ(f.p99_ms, 250);  // 99 of 100 new observations within 0.25 s
  EXPECT_EQ(Delta(a, b, "ranker", 7).requests, 0);
  Scrape two = a;
  Merge(&two, a);
  EXPECT_EQ(Delta(Scrape{}, two, "ranker", 1).requests, 1800);
}

TEST(RolloutTest, AResetCounterCountsFromZero) {
  const Scrape a = ParseGatewayMetrics(kScrapeB);          // 180 OK + 21 errors
  const Scrape restarted = ParseGatewayMetrics(kScrapeA);  // lower: the gateway restarted
  const Figures f = Delta(Scrape{}, DeltaScrape(a, restarted), "ranker", 2);
  EXPECT_EQ(f.requests, 101) << "everything counted since the restart";
  EXPECT_EQ(Delta(Scrape{}, DeltaScrape(restarted, a), "ranker", 2).requests, 100);
  EXPECT_TRUE(WentDown(a, restarted));
  EXPECT_FALSE(WentDown(restarted, a));
  EXPECT_FALSE(WentDown(a, a));
  EXPECT_FALSE(WentDown(Scrape{}, a));
}

TEST(RolloutTest, DecisionsRollBackAtOnceAdvanceAfterTheIntervalAndPromoteAtTheEnd) {
  Rollout r = Running();
  Figures good{100, 1, 20};
  EXPECT_EQ(Decide(r, good, 10500).kind, Decision::kWait) << "the interval is not over";
  EXPECT_EQ(Decide(r, good, 11000).kind, Decision::kNext);
  Figures errors{100, 10, 20};
  Decision d = Decide(r, errors, 10100);
  EXPECT_EQ(d.kind, Decision::kRollBack) << "a bad step does not wait for its interval";
  EXPECT_NE(d.reason.find("error rate 10.00 %"), std::string::npos) << d.reason;
  Figures slow{100, 0, 300};
  EXPECT_EQ(Decide(r, slow, 10100).kind, Decision::kRollBack);
  Figures few{5, 5, 300};
  EXPECT_EQ(Decide(r, few, 10100).kind, Decision::kWait) << "too few requests to judge";
  d = Decide(r, few, 20000);
  EXPECT_EQ(d.kind, Decision::kWait);
  EXPECT_NE(d.reason.find("waiting for 20 requests"), std::string::npos);
  r.step = 2;
  EXPECT_EQ(Decide(r, good, 11000).kind, Decision::kPromote);
}

TEST(RolloutTest, RouteWeightsPerStep) {
  ASSERT_OK_AND_ASSIGN(RouteSpec route,
                       ParseRoute("name: ranker\nmodel: m\nversions: [{version: 1, weight: 100}]\n"
                                  "match: [{header: g, value: b, version: 1}]"));
  RouteSpec at10 = RouteAtWeight(route, 1, 2, 10);
  ASSERT_EQ(at10.versions.size(), 2u);
  EXPECT_EQ(at10.versions[1].version, 2) << "the canary last";
  EXPECT_EQ(at10.versions[1].weight, 10);
  EXPECT_EQ(at10.stable, 1);
  RouteSpec done = RouteAtWeight(route, 1, 2, 100);
  ASSERT_EQ(done.versions.size(), 1u);
  EXPECT_EQ(done.stable, 2);
  EXPECT_TRUE(done.match.empty()) << "a rule naming version 1 went with it";
  ASSERT_OK(ParseRoute(RouteToJson(done)).status());
  RouteSpec back = RouteAtWeight(route, 1, 2, 0);
  ASSERT_EQ(back.versions.size(), 1u);
  EXPECT_EQ(back.versions[0].version, 1);
}

TEST(RolloutTest, JsonRoundTripAndValidation) {
  Rollout r = Running();
  r.history.push_back({0, 10, 100, 0.01, 12.5, -1, 0.05, "next step", 11000});
  ASSERT_OK_AND_ASSIGN(Rollout back, RolloutFromJson(r.ToJson()));
  EXPECT_EQ(back.ToJson(), r.ToJson());
  r.steps = {50, 25, 100};
  EXPECT_NE(ValidateRollout(r).message().find("increasing"), std::string::npos);
  r.steps = {10, 50};
  EXPECT_NE(ValidateRollout(r).message().find("end at 100"), std::string::npos);
  r = Running();
  r.to = 1;
  EXPECT_NE(ValidateRollout(r).message().find("already the stable"), std::string::npos);
}

// Issue 31: a 25 ms limit between the old bounds 10 and 25 ms; now every limit in 0.1 ms .. 10 s
// is resolved to within a factor 1.25, and the round ones exactly.
TEST(RolloutTest, P99LimitResolution) {
  LimitResolution exact = ResolveP99Limit(25);
  EXPECT_TRUE(exact.exact && exact.resolved);
  EXPECT_EQ(exact.upper_ms, 25);
  EXPECT_EQ(exact.Describe(), "a bucket bound");
  LimitResolution between = ResolveP99Limit(27);
  EXPECT_TRUE(between.resolved && !between.exact);
  EXPECT_EQ(between.lower_ms, 25);
  EXPECT_EQ(between.upper_ms, 30);
  EXPECT_EQ(between.Describe(), "between the bucket bounds 25 and 30 ms");
  EXPECT_FALSE(ResolveP99Limit(0.05).resolved);
  EXPECT_EQ(ResolveP99Limit(0.05).Describe(), "below the first bucket bound (0.1 ms)");
  EXPECT_FALSE(ResolveP99Limit(20000).resolved);
  EXPECT_EQ(ResolveP99Limit(20000).Describe(), "above the last bucket bound (10000 ms)");
  // The old layout could not resolve 20 ms: between 10 and 25 ms.
  EXPECT_FALSE(ResolveP99Limit(20, {0.005, 0.01, 0.025, 0.05}).resolved);
}

// Cumulative score buckets of the nodes' dais_inference_score for one (model, version).
std::string ScoreLines(const std::string& version, const std::vector<int>& per_bin) {
  std::string out;
  int cum = 0;
  for (size_t i = 0; i < per_bin.size(); ++i) {
    cum += per_bin[i];
    out += "dais_inference_score_bucket{model=\"fraud\",version=\"" + version + "\",le=\"" +
           (i + 1 == per_bin.size() ? std::string("+Inf") : std::to_string((i + 1) / 10.0)) +
           "\"} " + std::to_string(cum) + "\n";
  }
  return out;
}

TEST(RolloutTest, ScorePsiComparesCanaryWithStable) {
  // Ten bins of 0.1 and +Inf (empty). Stable: mostly low scores; a same-shaped canary; a
  // shifted one (mostly high).
  const std::vector<int> low = {40, 20, 10, 8, 6, 5, 4, 3, 2, 2, 0};
  const std::vector<int> high = {2, 2, 3, 4, 5, 6, 8, 10, 20, 40, 0};
  const Scrape same = ParseGatewayMetrics(ScoreLines("1", low) + ScoreLines("2", low));
  const Scrape shifted = ParseGatewayMetrics(ScoreLines("1", low) + ScoreLines("2", high));
  ASSERT_EQ(shifted.scores.size(), 2u);
  Figures f;
  AddScores(same, "fraud", 2, 1, 20, &f);
  EXPECT_NEAR(f.psi, 0, 1e-9);
  EXPECT_EQ(f.canary_scores, 100);
  EXPECT_EQ(f.stable_scores, 100);
  Figures g;
  AddScores(shifted, "fraud", 2, 1, 20, &g);
  EXPECT_GT(g.psi, 2);  // far past the usual 0.25
  Figures few;
  AddScores(shifted, "fraud", 2, 1, 1000, &few);  // fewer rows than min_requests: not measured
  EXPECT_EQ(few.psi, -1);
  Figures other;
  AddScores(shifted, "other", 2, 1, 20, &other);
  EXPECT_EQ(other.psi, -1);
  // Deltas and merges carry the scores too.
  const Scrape d = DeltaScrape(same, shifted);
  int64_t na = 0, nb = 0;
  EXPECT_EQ(Psi(d.scores.at({"fraud", "1"}), d.scores.at({"fraud", "1"}), &na, &nb), -1);  // 0 new
  Scrape merged = same;
  Merge(&merged, same);
  EXPECT_EQ(merged.scores.at({"fraud", "2"}).rbegin()->second, 200);

  Rollout r = Running();
  r.max_psi = 0.25;
  g.requests = 50;
  const Decision back = Decide(r, g, r.step_started_ms + 10);
  EXPECT_EQ(back.kind, Decision::kRollBack);
  EXPECT_NE(back.reason.find("the canary's scores shifted"), std::string::npos) << back.reason;
  f.requests = 50;
  EXPECT_EQ(Decide(r, f, r.step_started_ms + 10).kind, Decision::kWait);
  EXPECT_EQ(Decide(r, f, r.step_started_ms + 5000).kind, Decision::kNext);
  Figures unmeasured;  // the gate measured nothing: the canary does not move on
  unmeasured.requests = 50;
  const Decision waiting = Decide(r, unmeasured, r.step_started_ms + 5000);
  EXPECT_EQ(waiting.kind, Decision::kWait);
  EXPECT_NE(waiting.reason.find("waiting for scored rows"), std::string::npos);
  Rollout at_last = r;
  at_last.step = 2;  // 100 %: nothing to compare with, the earlier steps judged
  EXPECT_EQ(Decide(at_last, unmeasured, r.step_started_ms + 5000).kind, Decision::kPromote);
  r.max_psi = 0;  // unchecked: the shift does not matter
  EXPECT_EQ(Decide(r, g, r.step_started_ms + 5000).kind, Decision::kNext);

  r.max_psi = 0.25;
  r.history.push_back({0, 10, 50, 0, 5, 3.5, -2, "rolled back", 1});
  ASSERT_OK_AND_ASSIGN(Rollout back_again, RolloutFromJson(r.ToJson()));
  EXPECT_EQ(back_again.max_psi, 0.25);
  EXPECT_EQ(back_again.history[0].psi, 3.5);
  r.max_psi = 11;
  EXPECT_FALSE(ValidateRollout(r).ok());
}

TEST(RolloutTest, LiveAccuracyGate) {
  Rollout r = Running();
  r.accuracy_label = "fraud";
  r.min_accuracy_delta = -0.01;
  Figures f;
  f.requests = 50;
  f.p99_ms = 1;
  // Not measured yet: the step waits past its interval (not on a last step of 100 %).
  f.canary_labeled = 10;
  f.stable_labeled = 40;
  const Decision waiting = Decide(r, f, r.step_started_ms + r.interval_ms + 1);
  EXPECT_EQ(waiting.kind, Decision::kWait);
  EXPECT_NE(waiting.reason.find("waiting for labelled answers"), std::string::npos);
  Rollout at_last = r;
  at_last.step = static_cast<int>(r.steps.size()) - 1;
  EXPECT_EQ(Decide(at_last, f, r.step_started_ms + r.interval_ms + 1).kind, Decision::kPromote);
  // Worse by more than the limit: rolled back at once, before the interval.
  f.canary_labeled = f.stable_labeled = 40;
  f.canary_accuracy = 0.60;
  f.stable_accuracy = 0.95;
  const Decision worse = Decide(r, f, r.step_started_ms + 1);
  EXPECT_EQ(worse.kind, Decision::kRollBack);
  EXPECT_NE(worse.reason.find("live accuracy is -0.350"), std::string::npos) << worse.reason;
  // Within the limit (or better): the step holds for its interval, then moves on.
  f.canary_accuracy = 0.945;
  EXPECT_EQ(Decide(r, f, r.step_started_ms + 1).kind, Decision::kWait);
  EXPECT_EQ(Decide(r, f, r.step_started_ms + r.interval_ms + 1).kind, Decision::kNext);
  r.min_accuracy_delta = 2;
  EXPECT_FALSE(ValidateRollout(r).ok());
  r.min_accuracy_delta = 0.02;
  ASSERT_OK_AND_ASSIGN(Rollout back, RolloutFromJson(r.ToJson()));
  EXPECT_EQ(back.accuracy_label, "fraud");
  EXPECT_EQ(back.min_accuracy_delta, 0.02);
}

}  // namespace
}  // namespace dais::gateway
