#include "agents/orchestrator.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::agents {
namespace {

AgentSpec Agent(const std::string& name, const std::string& priority, double sla_ms) {
  AgentSpec a;
  a.name = name;
  a.priority = priority;
  a.sla_p99_ms = sla_ms;
  return a;
}

AgentLoad Load(double p99_ms, int64_t backlog = 0, std::vector<std::string> nodes = {}) {
  return {true, p99_ms, 100, backlog, std::move(nodes)};
}

// Applies decisions to the controls, as the leading scheduler writes them to etcd.
void Apply(const std::vector<Decision>& ds, std::map<std::string, AgentControl>* controls) {
  for (const Decision& d : ds) (*controls)[d.agent] = d.control;
}

TEST(OrchestratorTest, PausesLowerPrioritiesWhileAHigherOneMissesItsSlaAndResumesInOrder) {
  const std::vector<AgentSpec> agents = {
      Agent("alerts", "high", 500), Agent("retention", "normal", 0), Agent("reports", "low", 2000)};
  // Pause at the SLA, no throttling on latency (its threshold at the pause's).
  Orchestrator o({1.0, 0.8, 5000, 1.0});
  std::map<std::string, AgentControl> controls;
  // All within SLA: nothing to do.
  EXPECT_TRUE(
      o.Evaluate(0, agents, {{"alerts", Load(300)}, {"reports", Load(900)}}, controls).empty());
  // The high-priority agent over its SLA: both lower ones paused, with the reason.
  auto ds = o.Evaluate(1000, agents, {{"alerts", Load(812, 40)}, {"reports", Load(900)}}, controls);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].agent, "retention");
  EXPECT_EQ(ds[0].control.state, "paused");
  EXPECT_EQ(ds[0].control.reason,
            "agent alerts (high priority) p99 812 ms > 1 of its SLA 500 ms (backlog 40)");
  Apply(ds, &controls);
  // Still over: nothing new. Back under SLA but not by the margin (450 > 0.8 x 500): no resume.
  EXPECT_TRUE(o.Evaluate(2000, agents, {{"alerts", Load(700)}}, controls).empty());
  EXPECT_TRUE(o.Evaluate(3000, agents, {{"alerts", Load(450)}}, controls).empty());
  EXPECT_TRUE(o.Evaluate(9000, agents, {{"alerts", Load(450)}}, controls).empty());
  // Calm from 10 s: every 5 s the highest priority that gave way takes one step back, paused ->
  // throttled -> running; the low one waits for the normal one.
  EXPECT_TRUE(o.Evaluate(10000, agents, {{"alerts", Load(200)}}, controls).empty());
  EXPECT_TRUE(o.Evaluate(14999, agents, {{"alerts", Load(200)}}, controls).empty());
  const std::vector<std::pair<std::string, std::string>> steps = {{"retention", "throttled"},
                                                                  {"retention", "running"},
                                                                  {"reports", "throttled"},
                                                                  {"reports", "running"}};
  int64_t t = 15000;
  for (const auto& [agent, state] : steps) {
    // What gave way has a long latency (its backlog waits): neither a signal nor a reason to
    // hold the release back; nor is a lower priority's latency while a higher one is released.
    const std::map<std::string, AgentLoad> loads = {
        {"alerts", Load(200)}, {"retention", Load(9000, 5000)}, {"reports", Load(9000, 5000)}};
    EXPECT_TRUE(o.Evaluate(t - 1, agents, loads, controls).empty());
    ds = o.Evaluate(t, agents, loads, controls);
    ASSERT_EQ(ds.size(), 1u) << agent << " " << state;
    EXPECT_EQ(ds[0].agent, agent);
    EXPECT_EQ(ds[0].control.state, state);
    if (state == "throttled") {
      // Half what it ran at (reports: 100 runs in 10 s); retention never reported: the minimum.
      EXPECT_EQ(ds[0].control.rate, agent == "reports" ? 5 : 1);
    }
    Apply(ds, &controls);
    t += 5000;
  }
  // The low one resumed and working off its backlog slows the high one again: paused again.
  ds = o.Evaluate(t, agents, {{"alerts", Load(600)}, {"reports", Load(5000, 900)}}, controls);
  ASSERT_EQ(ds.size(), 2u);
}

TEST(OrchestratorTest, ThrottlesBeforePausingAndWhenANodeOfAHigherAgentIsBusy) {
  const std::vector<AgentSpec> agents = {Agent("urgent", "high", 100), Agent("bulk", "low", 0)};
  Orchestrator o;  // pause at 0.5 of the SLA, throttle at 0.35, CPU at 90 %
  std::map<std::string, AgentControl> controls;
  // bulk ran 100 runs in its 10 s window: 10 runs/s.
  EXPECT_TRUE(o.Evaluate(0, agents, {{"urgent", Load(30)}, {"bulk", Load(900)}}, controls).empty());
  auto ds = o.Evaluate(100, agents, {{"urgent", Load(40)}, {"bulk", Load(900)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "throttled");
  EXPECT_EQ(ds[0].control.rate, 5);  // half the rate it ran at
  EXPECT_EQ(ds[0].control.reason,
            "agent urgent (high priority) p99 40 ms > 0.35 of its SLA 100 ms (backlog 0): 5 "
            "runs/s");
  Apply(ds, &controls);
  EXPECT_TRUE(o.Evaluate(200, agents, {{"urgent", Load(45)}}, controls).empty());
  // Worse: paused.
  ds = o.Evaluate(300, agents, {{"urgent", Load(60)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "paused");
  Apply(ds, &controls);
  // The signal eases to the throttle's level and stays there: throttled after calm_ms, not
  // paused for as long as it lasts.
  EXPECT_TRUE(o.Evaluate(350, agents, {{"urgent", Load(45)}}, controls).empty());
  EXPECT_TRUE(o.Evaluate(5349, agents, {{"urgent", Load(45)}}, controls).empty());
  ds = o.Evaluate(5350, agents, {{"urgent", Load(45)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "throttled");
  EXPECT_NE(ds[0].control.reason.find("eased from a pause"), std::string::npos);
  EXPECT_EQ(ds[0].control.rate, 5);
  controls.clear();
  // The latency is fine but the node where urgent runs is busy: bulk throttled, naming it.
  ds = o.Evaluate(400, agents, {{"urgent", Load(5, 0, {"n1"})}, {"bulk", Load(900)}}, controls,
                  {{"n1", {0.95}}, {"n2", {0.99}}});
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "throttled");
  EXPECT_EQ(ds[0].control.reason,
            "node n1 CPU 95% busy (at least 90%), where agent urgent (high priority) runs: 5 "
            "runs/s");
  Apply(ds, &controls);
  // Below the threshold but above the calm level: no signal, no release either.
  EXPECT_TRUE(o.Evaluate(1000, agents, {{"urgent", Load(5, 0, {"n1"})}}, controls, {{"n1", {0.8}}})
                  .empty());
  EXPECT_TRUE(o.Evaluate(9000, agents, {{"urgent", Load(5, 0, {"n1"})}}, controls, {{"n1", {0.8}}})
                  .empty());
  // Calm (a busy node where no agent of concern runs does not count): released after 5 s.
  EXPECT_TRUE(o.Evaluate(10000, agents, {{"urgent", Load(5, 0, {"n1"})}}, controls,
                         {{"n1", {0.5}}, {"n2", {0.99}}})
                  .empty());
  ds = o.Evaluate(15000, agents, {{"urgent", Load(5, 0, {"n1"})}}, controls,
                  {{"n1", {0.5}}, {"n2", {0.99}}});
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "running");
}

TEST(OrchestratorTest, AMissOfTheLowestPriorityPausesNothingAndSilentAgentsAreIgnored) {
  const std::vector<AgentSpec> agents = {Agent("alerts", "high", 500),
                                         Agent("reports", "low", 100)};
  Orchestrator o;
  std::map<std::string, AgentControl> controls;
  EXPECT_TRUE(o.Evaluate(0, agents, {{"reports", Load(5000)}}, controls).empty());
  AgentLoad silent = Load(9000);
  silent.reporting = false;  // its runtimes stopped reporting: not a signal
  EXPECT_TRUE(o.Evaluate(0, agents, {{"alerts", silent}}, controls).empty());
  // Same priority: a high agent over its SLA pauses no other high agent.
  const std::vector<AgentSpec> peers = {Agent("a", "high", 100), Agent("b", "high", 100)};
  // By default the throttle and the pause come before the miss: at 0.35 and half the SLA.
  const std::vector<AgentSpec> two = {Agent("a", "high", 100), Agent("b", "low", 0)};
  EXPECT_TRUE(Orchestrator().Evaluate(0, two, {{"a", Load(35)}}, controls).empty());
  auto ds = Orchestrator().Evaluate(0, two, {{"a", Load(36)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "throttled");
  ds = Orchestrator().Evaluate(0, two, {{"a", Load(51)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].control.state, "paused");
  EXPECT_TRUE(o.Evaluate(0, peers, {{"a", Load(500)}}, controls).empty());
}

}  // namespace
}  // namespace dais::agents
