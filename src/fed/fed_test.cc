#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/status_testing.h"
#include "fed/privacy.h"
#include "fed/secure_agg.h"
#include "fed/update.h"

namespace dais::fed {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, float scale = 0.1f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(UpdateTest, MalformedUpdatesAreRefusedNamingTheClient) {
  ClientUpdate u{"edge-3", 10, {0.1f, 0.2f}};
  EXPECT_OK(CheckUpdate(u, 2));
  EXPECT_NE(CheckUpdate(u, 3).message().find("client edge-3: the update has 2 parameters, the "
                                             "model 3"),
            std::string::npos);
  u.delta[1] = std::nanf("");
  EXPECT_NE(CheckUpdate(u, 2).message().find("parameter 1 is NaN"), std::string::npos);
  u.delta[1] = INFINITY;
  EXPECT_NE(CheckUpdate(u, 2).message().find("parameter 1 is infinite"), std::string::npos);
  u = {"e", 0, {0.1f}};
  EXPECT_NE(CheckUpdate(u, 1).message().find("samples must be positive"), std::string::npos);
  u = {"e", 5, {3.0f, 4.0f}};
  EXPECT_NE(CheckUpdate(u, 2, 4.9).message().find("L2 norm 5"), std::string::npos);
  EXPECT_OK(CheckUpdate(u, 2, 5.1));
}

TEST(UpdateTest, FedAvgWeightsBySamplesAndClipBounds) {
  const std::vector<ClientUpdate> us = {{"a", 1, {1.0f, 0.0f}}, {"b", 3, {0.0f, 4.0f}}};
  const std::vector<float> avg = FedAvg(us);
  EXPECT_FLOAT_EQ(avg[0], 0.25f);
  EXPECT_FLOAT_EQ(avg[1], 3.0f);
  std::vector<float> v = {3, 4};
  EXPECT_DOUBLE_EQ(ClipL2(&v, 1), 0.2);
  EXPECT_NEAR(L2Norm(v), 1, 1e-6);
  EXPECT_EQ(ClipL2(&v, 10), 1);
}

TEST(UpdateTest, Int8CompressionLosesAtMostHalfAStep) {
  const std::vector<float> v = Random(1000, 1);
  const Int8Update q = QuantizeInt8(v);
  const std::vector<float> back = DequantizeInt8(q);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_LE(std::fabs(back[i] - v[i]), q.scale / 2 + 1e-7);
  EXPECT_EQ(DequantizeInt8(QuantizeInt8({0, 0})), (std::vector<float>{0, 0}));
}

// Three clients mask their updates for a roster; the aggregator only adds what it receives.
TEST(SecureAggregationTest, MasksCancelInTheSumAndHideEachUpdate) {
  const std::vector<std::string> ids = {"c1", "c2", "c3"};
  std::vector<KeyPair> keys;
  std::map<std::string, std::string> roster;
  for (const auto& id : ids) {
    ASSERT_OK_AND_ASSIGN(KeyPair k, KeyPair::Generate());
    roster[id] = k.public_key();
    keys.push_back(std::move(k));
  }
  const size_t n = 500;
  std::vector<ClientUpdate> plain;
  std::vector<std::vector<uint64_t>> masked;
  for (size_t i = 0; i < ids.size(); ++i) {
    plain.push_back({ids[i], static_cast<int64_t>(10 * (i + 1)), Random(n, i + 7)});
    ASSERT_OK_AND_ASSIGN(auto m, Mask(Encode(plain[i].delta, plain[i].samples), ids[i], keys[i],
                                      roster, "fed-1/round-4"));
    masked.push_back(std::move(m));
  }
  std::vector<uint64_t> sum;
  for (const auto& m : masked) AddInto(&sum, m);
  int64_t total = 0;
  const std::vector<float> mean = DecodeMean(sum, &total);
  EXPECT_EQ(total, 60);
  const std::vector<float> expected = FedAvg(plain);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(mean[i], expected[i], 1e-5) << i;
  // One client's masked update alone says nothing: its elements are spread over the whole ring
  // (uniform: |x| < 2^50 with probability 2^-13), where its encoding is within 2^24, and its
  // weight is hidden too.
  const std::vector<uint64_t> encoded = Encode(plain[0].delta, plain[0].samples);
  size_t small = 0, encoded_small = 0;
  for (size_t i = 0; i <= n; ++i) {
    small += std::llabs(static_cast<int64_t>(masked[0][i])) < (int64_t{1} << 50);
    encoded_small += std::llabs(static_cast<int64_t>(encoded[i])) < (int64_t{1} << 24);
  }
  EXPECT_EQ(encoded_small, n + 1);
  EXPECT_LT(small, n / 100);
  EXPECT_NE(masked[0][n], 10u);
  // A mask is the same on both sides of a pair, and differs between rounds.
  ASSERT_OK_AND_ASSIGN(std::string s12, keys[0].PairSeed(roster["c2"], "r"));
  ASSERT_OK_AND_ASSIGN(std::string s21, keys[1].PairSeed(roster["c1"], "r"));
  EXPECT_EQ(s12, s21);
  EXPECT_NE(*keys[0].PairSeed(roster["c2"], "r2"), s12);
  EXPECT_FALSE(keys[0].PairSeed("short", "r").ok());
  EXPECT_FALSE(Mask({1}, "c9", keys[0], roster, "r").ok());
}

TEST(SecureAggregationTest, AClientThatDropsAfterTheRosterIsRecoveredFromTheSurvivorsSeeds) {
  std::map<std::string, std::string> roster;
  std::map<std::string, KeyPair> keys;
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_OK_AND_ASSIGN(KeyPair k, KeyPair::Generate());
    roster[id] = k.public_key();
    keys.emplace(id, std::move(k));
  }
  std::vector<ClientUpdate> survivors;
  std::vector<uint64_t> sum;
  for (const char* id : {"a", "c", "d"}) {  // b dropped after masking would have begun
    survivors.push_back({id, 5, Random(64, id[0])});
    ASSERT_OK_AND_ASSIGN(
        auto m, Mask(Encode(survivors.back().delta, 5), id, keys.at(id), roster, "round-9"));
    AddInto(&sum, m);
  }
  // Before recovery the sum is masked; each survivor reveals its seed with b only.
  for (const char* id : {"a", "c", "d"}) {
    ASSERT_OK_AND_ASSIGN(std::string seed, keys.at(id).PairSeed(roster["b"], "round-9"));
    RemoveDangling(&sum, id, "b", seed);
  }
  int64_t total = 0;
  const std::vector<float> mean = DecodeMean(sum, &total);
  EXPECT_EQ(total, 15);
  const std::vector<float> expected = FedAvg(survivors);
  for (size_t i = 0; i < mean.size(); ++i) EXPECT_NEAR(mean[i], expected[i], 1e-5);
}

TEST(PrivacyTest, NoiseHasItsDeviationAndEpsilonGrowsWithRounds) {
  std::vector<float> v(20000, 0.0f);
  AddGaussianNoise(&v, 0.5, "a fixed seed of the test");
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  const double mean = s / v.size();
  EXPECT_NEAR(mean, 0, 0.02);
  EXPECT_NEAR(std::sqrt(s2 / v.size() - mean * mean), 0.5, 0.02);
  // Without a seed: from RAND_bytes, never the same twice.
  std::vector<float> a(8, 0.0f), b(8, 0.0f);
  AddGaussianNoise(&a, 1.0);
  AddGaussianNoise(&b, 1.0);
  EXPECT_NE(a, b);
  const double e1 = GaussianEpsilon(1.0, 1, 1e-5);
  const double e10 = GaussianEpsilon(1.0, 10, 1e-5);
  EXPECT_GT(e10, e1);
  EXPECT_LT(GaussianEpsilon(2.0, 10, 1e-5), e10);  // more noise, less spent
  // One Gaussian mechanism with sigma 1 at delta 1e-5: min over a of a/2 + ln(1e5)/(a - 1), at
  // a - 1 = sqrt(2 ln 1e5) = 4.798: 5.2986.
  EXPECT_NEAR(e1, 5.2986, 0.001);
  EXPECT_TRUE(std::isinf(GaussianEpsilon(0, 1, 1e-5)));
}

}  // namespace
}  // namespace dais::fed
