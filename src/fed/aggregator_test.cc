#include "fed/aggregator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/status_testing.h"
#include "fed/federation_spec.h"
#include "fed/secure_agg.h"

namespace dais::fed {
namespace {

struct Fixture {
  explicit Fixture(FederationSpec s, std::vector<float> global = {0, 0})
      : agg(
            std::move(s), std::move(global), 1, [this] { return now; },
            [this](const std::string& line) { log.push_back(line); }) {}
  int64_t now = 1000000;
  std::vector<std::string> log;
  Aggregator agg;

  bool Logged(const std::string& part) const {
    for (const auto& l : log) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

FederationSpec Spec(int per_round, int quorum) {
  FederationSpec s;
  s.name = "f";
  s.rounds = 3;
  s.clients_per_round = per_round;
  s.min_clients = quorum;
  s.round_deadline_ms = 10000;
  return s;
}

Submission Plain(const std::string& c, int64_t round, int64_t samples, std::vector<float> d) {
  Submission s;
  s.client = c;
  s.round = round;
  s.samples = samples;
  s.delta = std::move(d);
  return s;
}

TEST(AggregatorTest, ARoundWaitsForAllSelectedThenAveragesBySamples) {
  Fixture f(Spec(3, 2));
  for (const char* c : {"a", "b"}) EXPECT_EQ(f.agg.Poll(c, "", 0).kind, Task::Kind::kWait);
  EXPECT_FALSE(f.agg.Tick());  // the quorum is there, but it gathers for a while first
  EXPECT_EQ(f.agg.Poll("c", "", 0).kind, Task::Kind::kWait);
  EXPECT_TRUE(f.Logged("trainer c joined"));
  EXPECT_FALSE(f.agg.Tick());  // all three: selected at once
  Task t = f.agg.Poll("a", "", 0);
  ASSERT_EQ(t.kind, Task::Kind::kTrain);
  EXPECT_EQ(t.round, 1);
  EXPECT_EQ(*t.weights, (std::vector<float>{0, 0}));
  ASSERT_OK(f.agg.Submit(Plain("a", 1, 1, {1, 0})).status());
  ASSERT_OK(f.agg.Submit(Plain("b", 1, 3, {0, 4})).status());
  EXPECT_EQ(f.agg.Submit(Plain("b", 1, 3, {0, 4})).status().code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(f.agg.Tick());  // c has until the deadline
  ASSERT_OK(f.agg.Submit(Plain("c", 1, 4, {0, 0})).status());
  auto o = f.agg.Tick();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->round, 1);
  EXPECT_EQ(o->samples, 8);
  EXPECT_FLOAT_EQ((*o->global)[0], 1.0f / 8);
  EXPECT_FLOAT_EQ((*o->global)[1], 12.0f / 8);
  EXPECT_EQ(f.agg.round(), 2);
  EXPECT_EQ(f.agg.Submit(Plain("c", 1, 4, {0, 0})).status().code(),
            StatusCode::kFailedPrecondition);  // late: round 1 is over
}

TEST(AggregatorTest, StragglersAreLeftOutAtTheDeadlineAndAShortRoundIsDrawnAgain) {
  Fixture f(Spec(3, 2));
  for (const char* c : {"a", "b", "c"}) f.agg.Poll(c, "", 0);
  f.agg.Tick();
  ASSERT_OK(f.agg.Submit(Plain("a", 1, 1, {1, 1})).status());
  f.now += 10001;  // the deadline: one update of the quorum of two
  for (const char* c : {"a", "b", "c"}) f.agg.Poll(c, "", 0);
  EXPECT_FALSE(f.agg.Tick());
  EXPECT_TRUE(f.Logged("round 1 (attempt 1) failed: 1 of 3 updates by the deadline (quorum 2)"));
  f.agg.Tick();  // drawn again: round 1, attempt 2
  EXPECT_EQ(f.agg.Poll("b", "", 0).kind, Task::Kind::kTrain);
  ASSERT_OK(f.agg.Submit(Plain("a", 1, 1, {1, 1})).status());
  ASSERT_OK(f.agg.Submit(Plain("b", 1, 1, {3, 3})).status());
  f.now += 10001;  // c never answers: the quorum is met at the deadline
  auto o = f.agg.Tick();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->attempt, 2);
  EXPECT_EQ(o->contributed, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o->dropped, (std::vector<std::string>{"c"}));
  EXPECT_FLOAT_EQ((*o->global)[0], 2.0f);
}

TEST(AggregatorTest, AMalformedUpdateIsRefusedNamedAndDoesNotCount) {
  FederationSpec s = Spec(2, 1);
  s.max_update_norm = 10;
  Fixture f(s);
  for (const char* c : {"a", "b"}) f.agg.Poll(c, "", 0);
  f.agg.Tick();
  auto bad = f.agg.Submit(Plain("a", 1, 1, {1, std::nanf("")}));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("client a"), std::string::npos);
  EXPECT_NE(bad.status().message().find("parameter 1 is NaN"), std::string::npos);
  EXPECT_EQ(f.agg.Submit(Plain("a", 1, 1, {1, 2, 3})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(f.agg.Submit(Plain("a", 1, 1, {100, 0})).status().message().find("L2 norm"),
            std::string::npos);
  EXPECT_EQ(f.agg.Submit(Plain("z", 1, 1, {1, 1})).status().code(),
            StatusCode::kFailedPrecondition);  // not selected
  ASSERT_OK(f.agg.Submit(Plain("b", 1, 2, {2, 2})).status());
  f.now += 10001;
  auto o = f.agg.Tick();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->contributed, (std::vector<std::string>{"b"}));
  EXPECT_EQ(o->refused.size(), 1u);  // one trainer, counted once however often it tried
  EXPECT_EQ(*o->global, (std::vector<float>{2, 2}));  // the refused updates changed nothing
}

// Secure aggregation end to end through the aggregator: keys, roster, masked updates, a client
// that drops after the roster, the survivors' seeds, and the mean equal to the plain FedAvg.
TEST(AggregatorTest, SecureRoundsRecoverFromADropAndSeeOnlyTheSum) {
  FederationSpec s = Spec(3, 2);
  s.secure = true;
  Fixture f(s);
  std::map<std::string, KeyPair> keys;
  for (const char* c : {"a", "b", "c"}) keys.emplace(c, KeyPair::Generate().value());
  for (auto& [c, k] : keys) f.agg.Poll(c, "", 0);
  f.agg.Tick();
  for (auto& [c, k] : keys) {
    Task t = f.agg.Poll(c, "", 0);
    ASSERT_EQ(t.kind, Task::Kind::kTrain);
    EXPECT_TRUE(t.roster.empty());  // a key first
    f.agg.Poll(c, k.public_key(), 1);
  }
  f.agg.Tick();  // the roster is fixed
  const std::map<std::string, std::vector<float>> deltas = {{"a", {1, 0}}, {"b", {0, 4}}};
  const std::map<std::string, int64_t> samples = {{"a", 1}, {"b", 3}};
  for (const auto& [c, d] : deltas) {
    Task t = f.agg.Poll(c, "", 0);
    ASSERT_EQ(t.roster.size(), 3u);
    Submission sub;
    sub.client = c;
    sub.round = 1;
    sub.attempt = 1;
    sub.masked = Mask(Encode(d, samples.at(c)), c, keys.at(c), t.roster, "f/1").value();
    ASSERT_OK(f.agg.Submit(std::move(sub)).status());
  }
  f.now += 10001;  // c dropped
  EXPECT_FALSE(f.agg.Tick());
  for (const auto& [c, d] : deltas) {
    Task t = f.agg.Poll(c, "", 0);
    ASSERT_EQ(t.kind, Task::Kind::kReveal);
    ASSERT_EQ(t.dropped, (std::vector<std::string>{"c"}));
    ASSERT_OK(f.agg.Reveal(c, 1, 1, {{"c", keys.at(c).PairSeed(t.roster.at("c"), "f/1").value()}}));
  }
  auto o = f.agg.Tick();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->samples, 4);
  EXPECT_NEAR((*o->global)[0], 0.25, 1e-5);
  EXPECT_NEAR((*o->global)[1], 3.0, 1e-5);
  EXPECT_TRUE(std::isnan(o->mean_train_loss));
}

// A masked update cannot be checked alone; the unmasked sum can. A trainer claiming a weight of 0
// (or sending anything that breaks the mean) fails the round; the model does not move.
TEST(AggregatorTest, ASecureSumThatBreaksTheRulesFailsTheRound) {
  FederationSpec s = Spec(2, 2);
  s.secure = true;
  s.max_update_norm = 10;
  Fixture f(s);
  std::map<std::string, KeyPair> keys;
  for (const char* c : {"a", "b"}) keys.emplace(c, KeyPair::Generate().value());
  for (auto& [c, k] : keys) f.agg.Poll(c, "", 0);
  f.agg.Tick();
  for (auto& [c, k] : keys) f.agg.Poll(c, k.public_key(), 1);
  EXPECT_EQ(f.agg.Poll("a", keys.at("b").public_key(), 1).kind, Task::Kind::kWait);
  f.agg.Tick();
  for (auto& [c, k] : keys) {
    Task t = f.agg.Poll(c, "", 0);
    Submission sub;
    sub.client = c;
    sub.round = 1;
    sub.attempt = 1;
    // b sends a huge update: its norm cannot be seen, the mean's can.
    std::vector<float> d = c == "a" ? std::vector<float>{1, 0} : std::vector<float>{1000, 0};
    sub.masked = Mask(Encode(d, 1), c, k, t.roster, "f/1").value();
    ASSERT_OK(f.agg.Submit(std::move(sub)).status());
  }
  EXPECT_FALSE(f.agg.Tick());
  EXPECT_TRUE(f.Logged("the unmasked mean's L2 norm 500.5 is above the bound 10"));
  EXPECT_EQ(f.agg.round(), 1);  // drawn again; the model did not move
  // Keys are used once: the redrawn round refuses a key of the failed attempt.
  f.agg.Tick();
  f.agg.Poll("a", keys.at("a").public_key(), 1);
  EXPECT_EQ(f.agg.Poll("a", "", 0).kind, Task::Kind::kTrain);  // still asked for a fresh key
}

TEST(AggregatorTest, PrivacyClipsAveragesUnweightedAndReportsEpsilon) {
  FederationSpec s = Spec(2, 2);
  s.privacy = true;
  s.clip_norm = 1;
  s.noise_multiplier = 1;
  Fixture f(s, std::vector<float>(1000, 0));
  for (const char* c : {"a", "b"}) f.agg.Poll(c, "", 0);
  f.agg.Tick();
  EXPECT_EQ(f.agg.Poll("a", "", 0).clip_norm, 1);
  std::vector<float> big(1000, 0);
  big[0] = 100;  // clipped to norm 1 by the aggregator
  ASSERT_OK(f.agg.Submit(Plain("a", 1, 1000, big)).status());
  ASSERT_OK(f.agg.Submit(Plain("b", 1, 1, std::vector<float>(1000, 0))).status());
  auto o = f.agg.Tick();
  ASSERT_TRUE(o);
  EXPECT_EQ(o->samples, 2);  // every client counts 1
  EXPECT_GT(o->epsilon, 0);
  // Noise of deviation 1 x 1 / 2 on every value; the clipped signal is 0.5 at index 0.
  double sq = 0;
  for (size_t i = 1; i < 1000; ++i) sq += (*o->global)[i] * (*o->global)[i];
  EXPECT_NEAR(std::sqrt(sq / 999), 0.5, 0.06);
}

TEST(AggregatorTest, TheLastRoundEndsTheFederation) {
  FederationSpec s = Spec(1, 1);
  s.rounds = 1;
  Fixture f(s);
  f.agg.Poll("a", "", 0);
  f.agg.Tick();
  ASSERT_OK(f.agg.Submit(Plain("a", 1, 1, {1, 1})).status());
  ASSERT_TRUE(f.agg.Tick());
  EXPECT_TRUE(f.agg.done());
  EXPECT_EQ(f.agg.Poll("a", "", 0).kind, Task::Kind::kDone);
}

}  // namespace
}  // namespace dais::fed

namespace dais::fed {
namespace {

TEST(FederationSpecTest, TheStoredFormReadsBackTheSame) {
  auto s = ParseFederationSpec(
      "kind: federation\nname: f\nmodel: m\nrepository: /r\nrounds: 7\nclients_per_round: 5\n"
      "min_clients: 3\nround_deadline: 1500ms\naggregation: fedprox\nproximal_mu: 0.5\n"
      "local: {epochs: 2, learning_rate: 0.25, batch_size: 8}\nsecure_aggregation: true\n"
      "privacy: {clip_norm: 2, noise_multiplier: 0.5}\nholdout: h\npublish: every_round\n"
      "release: {strategy: canary, route: r, deployment: d}\n",
      "/x/f.yaml", /*check_files=*/false);
  ASSERT_OK(s.status());
  const std::string yaml = FederationSpecToYaml(*s);
  auto back = ParseFederationSpec(yaml, "etcd", false);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << yaml;
  EXPECT_EQ(back->holdout, "/x/h");
  EXPECT_EQ(back->rounds, 7);
  EXPECT_EQ(back->round_deadline_ms, 1500);
  EXPECT_TRUE(back->fedprox && back->secure && back->privacy && back->publish_every_round);
  EXPECT_EQ(back->proximal_mu, 0.5);
  EXPECT_EQ(back->local_epochs, 2);
  EXPECT_EQ(back->clip_norm, 2);
  EXPECT_NE(back->release_yaml.find("canary"), std::string::npos);
  EXPECT_NE(ParseFederationSpec("name: f\nmodel: m\nrepository: r\nsecure_aggregation: true\n"
                                "min_clients: 1\n",
                                "f.yaml", false)
                .status()
                .message()
                .find("min_clients: at least 2 with secure_aggregation"),
            std::string::npos);
}

}  // namespace
}  // namespace dais::fed
