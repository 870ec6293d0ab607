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

AgentLoad Load(double p99_ms, int64_t backlog = 0) { return {true, p99_ms, 100, backlog}; }

// Applies decisions to the controls, as the leading scheduler writes them to etcd.
void Apply(const std::vector<Decision>& ds, std::map<std::string, AgentControl>* controls) {
  for (const Decision& d : ds) (*controls)[d.agent] = d.control;
}

TEST(OrchestratorTest, PausesLowerPrioritiesWhileAHigherOneMissesItsSlaAndResumesInOrder) {
  const std::vector<AgentSpec> agents = {
      Agent("alerts", "high", 500), Agent("retention", "normal", 0), Agent("reports", "low", 2000)};
  Orchestrator o({1.0, 0.8, 5000});
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
  // Calm from 10 s: at 15 s the normal priority resumes; the low one waits another 5 s.
  EXPECT_TRUE(o.Evaluate(10000, agents, {{"alerts", Load(200)}}, controls).empty());
  EXPECT_TRUE(o.Evaluate(14999, agents, {{"alerts", Load(200)}}, controls).empty());
  ds = o.Evaluate(15000, agents, {{"alerts", Load(200)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].agent, "retention");
  EXPECT_EQ(ds[0].control.state, "running");
  Apply(ds, &controls);
  EXPECT_TRUE(o.Evaluate(17000, agents, {{"alerts", Load(200)}}, controls).empty());
  ds = o.Evaluate(20000, agents, {{"alerts", Load(200)}}, controls);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].agent, "reports");
  Apply(ds, &controls);
  // The low one resumed and working off its backlog slows the high one again: paused again.
  ds = o.Evaluate(21000, agents, {{"alerts", Load(600)}, {"reports", Load(5000, 900)}}, controls);
  ASSERT_EQ(ds.size(), 2u);
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
  // By default the pause comes before the miss: at half the SLA.
  const std::vector<AgentSpec> two = {Agent("a", "high", 100), Agent("b", "low", 0)};
  EXPECT_TRUE(Orchestrator().Evaluate(0, two, {{"a", Load(50)}}, controls).empty());
  EXPECT_EQ(Orchestrator().Evaluate(0, two, {{"a", Load(51)}}, controls).size(), 1u);
  EXPECT_TRUE(o.Evaluate(0, peers, {{"a", Load(500)}}, controls).empty());
}

}  // namespace
}  // namespace dais::agents
