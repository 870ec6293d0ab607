#include "gateway/route.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/status_testing.h"

namespace dais::gateway {
namespace {

RouteSpec Canary(int canary_weight) {
  RouteSpec r;
  r.name = "ranker";
  r.model = "mlp_small";
  r.versions = {{1, 100 - canary_weight}, {2, canary_weight}};
  r.stable = 1;
  r.sticky_header = "x-user";
  return r;
}

auto NoHeaders() {
  return [](std::string_view) { return std::string_view(); };
}

TEST(RouteTest, ParsesValidatesAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(RouteSpec r, ParseRoute(R"(
kind: route
name: ranker
model: mlp_small
versions: [{version: 1, weight: 90}, {version: 2, weight: 10}]
sticky_header: X-User-Id
match: [{header: X-Group, value: beta, version: 2}]
timeout_ms: 500
try_timeout_ms: 100
shadow: {version: 2, percent: 5}
)"));
  EXPECT_EQ(r.try_timeout_ms, 100);
  EXPECT_EQ(r.shadow_version, 2);
  EXPECT_DOUBLE_EQ(r.shadow_percent, 5);
  EXPECT_EQ(r.stable, 1);  // the first listed
  EXPECT_EQ(r.sticky_header, "x-user-id");
  EXPECT_EQ(r.match[0].header, "x-group");
  ASSERT_OK_AND_ASSIGN(RouteSpec again, ParseRoute(RouteToJson(r)));  // JSON is YAML
  EXPECT_EQ(RouteToJson(again), RouteToJson(r));
  ASSERT_OK_AND_ASSIGN(RouteSpec bare,
                       ParseRoute("name: m\nversions: [{version: 3, weight: 100}]"));
  EXPECT_EQ(bare.model, "m");
}

TEST(RouteTest, BadRoutesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name: r\nversions: [{version: 1, weight: 90}]", "sum to 90"},
      {"name: r\nversions: [{version: 1, weight: 100}]\nstable: 2", "stable: version 2"},
      {"name: r\nversions: [{version: 1, weight: 100}]\nmatch: [{header: h, value: v, version: 5}]",
       "match[0].version: 5"},
      {"name: r\nversions: [{version: 1, weight: 100}]\nweights: 1", "weights: unknown field"},
      {"name: r\nversions: [{version: 1, weight: 100}]\ntimeout_ms: 50\ntry_timeout_ms: 80",
       "try_timeout_ms: 0 (none) to timeout_ms (50)"},
      {"name: r\nversions: [{version: 1, wieght: 100}]", "versions[0].wieght: unknown field"},
      {"name: r\nversions: [{version: 1, weight: 50}, {version: 1, weight: 50}]", "listed twice"},
      {"name: r\nversions: [{version: 1, weight: lots}]", "versions[0].weight: expected a number"},
      {"name: 'a b'\nversions: [{version: 1, weight: 100}]", "name: 'a b'"},
      {"kind: deployment\nname: r", "kind: 'deployment' is not route"},
      {"name: r", "versions: at least one"},
      {"[1, 2]", "must be a YAML mapping"},
      {"name: r\nversions: [{version: 1, weight: 100}]\nshadow: {version: 2, percent: 0}",
       "shadow.percent"},
      {"name: r\nversions: [{version: 1, weight: 100}]\nshadow: {percent: 5}", "shadow.version"},
  };
  for (const auto& [text, want] : cases) {
    auto r = ParseRoute(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << text << " -> " << r.status().message();
  }
}

TEST(RouteTest, WeightsSplitTrafficWithinTwoPercent) {
  const RouteSpec r = Canary(10);
  std::mt19937_64 rng(7);
  int canary = 0;
  for (int i = 0; i < 10000; ++i) canary += ChooseVersion(r, -1, NoHeaders(), rng()).version == 2;
  EXPECT_NEAR(canary, 1000, 200);
}

TEST(RouteTest, StickyUsersKeepTheirVersionAndOnlyMoveTowardTheCanary) {
  std::map<std::string, int64_t> at10;
  for (int u = 0; u < 5000; ++u) {
    const std::string user = "user-" + std::to_string(u);
    auto header = [&user](std::string_view name) {
      return name == "x-user" ? std::string_view(user) : std::string_view();
    };
    const VersionChoice c = ChooseVersion(Canary(10), -1, header, u * 31u);
    EXPECT_STREQ(c.how, "sticky");
    // Same user, any random number: the same version.
    EXPECT_EQ(ChooseVersion(Canary(10), -1, header, 12345).version, c.version);
    at10[user] = c.version;
  }
  int moved_back = 0, canary10 = 0;
  for (const auto& [user, version] : at10) {
    auto header = [&user](std::string_view name) {
      return name == "x-user" ? std::string_view(user) : std::string_view();
    };
    canary10 += version == 2;
    moved_back += version == 2 && ChooseVersion(Canary(25), -1, header, 0).version != 2;
  }
  EXPECT_EQ(moved_back, 0) << "growing the canary keeps its users";
  EXPECT_NEAR(canary10, 500, 125);
}

TEST(RouteTest, PathVersionAndMatchRulesComeFirst) {
  RouteSpec r = Canary(0);
  r.match = {{"x-group", "beta", 2}};
  auto beta = [](std::string_view name) {
    return name == "x-group" ? std::string_view("beta") : std::string_view();
  };
  EXPECT_EQ(ChooseVersion(r, -1, beta, 1).version, 2);
  EXPECT_STREQ(ChooseVersion(r, -1, beta, 1).how, "match");
  EXPECT_EQ(ChooseVersion(r, 7, beta, 1).version, 7);
  EXPECT_EQ(ChooseVersion(r, -1, NoHeaders(), 1).version, 1);
}

}  // namespace
}  // namespace dais::gateway
