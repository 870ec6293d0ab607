// RedisTier against real redis-server processes (started on free loopback ports): the storage
// layout, the write script's event-time rule, TTL jitter, malformed records, and the same reads
// through a 3-master Redis Cluster.
#include "features/store/redis_tier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <future>

#include "common/status_testing.h"
#include "features/store/feature_store.h"
#include "redis/client.h"
#include "redis/testing/redis_process.h"

namespace dais::features {
namespace {

using redis::testing::RedisCluster;
using redis::testing::RedisProcess;

constexpr const char* kSpec = R"(
domain: t
entities: [{name: user_id, key_type: int64}]
feature_groups:
  - name: g
    entity: user_id
    version: 3
    ttl: 100s
    ttl_jitter: 0.5
    features:
      - {name: a, dtype: FP32, default: 7}
      - {name: b, dtype: INT64, shape: [2], default: [1, 2]}
)";

std::string Payload(float a, int64_t b0, int64_t b1) {
  std::string p(20, '\0');
  std::memcpy(p.data(), &a, 4);
  std::memcpy(p.data() + 4, &b0, 8);
  std::memcpy(p.data() + 12, &b1, 8);
  return p;
}

std::vector<StatusOr<bool>> Write(OnlineTier& tier, std::vector<TierWrite> w) {
  std::promise<std::vector<StatusOr<bool>>> pr;
  tier.Write(std::move(w), std::chrono::steady_clock::now() + std::chrono::seconds(2),
             [&](auto r) { pr.set_value(std::move(r)); });
  return pr.get_future().get();
}

std::vector<StatusOr<TierRecordPtr>> Read(OnlineTier& tier, std::vector<TierRead> r) {
  std::promise<std::vector<StatusOr<TierRecordPtr>>> pr;
  tier.Read(std::move(r), std::chrono::steady_clock::now() + std::chrono::seconds(2),
            [&](auto, auto x) { pr.set_value(std::move(x)); });
  return pr.get_future().get();
}

class RedisTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ParseFeatureSpec(kSpec, "t.yaml");
    ASSERT_OK(spec);
    spec_ = *spec;
    auto server = RedisProcess::Start();
    ASSERT_OK(server);
    server_ = std::move(server).value();
    auto o = redis::ParseSeeds(server_->address());
    ASSERT_OK(o);
    auto c = redis::Client::Create(*o);
    ASSERT_OK(c);
    client_ = std::move(c).value();
    ASSERT_TRUE(client_->WaitUntilReachable(std::chrono::seconds(5)));
    tier_ = std::make_unique<RedisTier>(client_.get());
  }
  const GroupSpec& g() { return spec_->groups[0]; }
  std::string Key(const std::string& id) { return RecordKey(*spec_, g(), id); }

  FeatureSpecPtr spec_;
  std::unique_ptr<RedisProcess> server_;
  std::unique_ptr<redis::Client> client_;
  std::unique_ptr<RedisTier> tier_;
};

TEST_F(RedisTierTest, LayoutIsTheDocumentedOne) {
  EXPECT_EQ(Key("42"), "dais:t:{user_id=42}:g:v3");
  auto w = Write(*tier_, {{Key("42"), &g(), 1700000000123456, Payload(1.5f, -3, 4)}});
  ASSERT_TRUE(w[0].ok() && *w[0]) << (w[0].ok() ? "" : w[0].status().message());
  auto ts = server_->Call({"HGET", Key("42"), "_ts"});
  ASSERT_OK(ts);
  ASSERT_EQ(ts->str.size(), 8u);
  int64_t t;
  std::memcpy(&t, ts->str.data(), 8);
  EXPECT_EQ(t, 1700000000123456);
  auto a = server_->Call({"HGET", Key("42"), "a"});
  float fa;
  ASSERT_EQ(a->str.size(), 4u);
  std::memcpy(&fa, a->str.data(), 4);
  EXPECT_EQ(fa, 1.5f);
  auto b = server_->Call({"HGET", Key("42"), "b"});
  ASSERT_EQ(b->str.size(), 16u);
  int64_t b0;
  std::memcpy(&b0, b->str.data(), 8);
  EXPECT_EQ(b0, -3);
  auto r = Read(*tier_, {{Key("42"), &g()}, {Key("43"), &g()}});
  ASSERT_OK(r[0]);
  EXPECT_TRUE((*r[0])->found);
  EXPECT_EQ((*r[0])->payload, Payload(1.5f, -3, 4));
  EXPECT_EQ((*r[0])->event_time_us, 1700000000123456);
  ASSERT_OK(r[1]);
  EXPECT_FALSE((*r[1])->found);
}

TEST_F(RedisTierTest, AnOlderWriteNeverOverwritesANewerOne) {
  ASSERT_TRUE(*Write(*tier_, {{Key("1"), &g(), 2000, Payload(2.f, 0, 0)}})[0]);
  auto older = Write(*tier_, {{Key("1"), &g(), 1999, Payload(1.f, 0, 0)}});
  ASSERT_OK(older[0]);
  EXPECT_FALSE(*older[0]);
  EXPECT_EQ((*Read(*tier_, {{Key("1"), &g()}})[0])->payload, Payload(2.f, 0, 0));
  EXPECT_TRUE(*Write(*tier_, {{Key("1"), &g(), 2000, Payload(3.f, 0, 0)}})[0]) << "equal: replay";
  EXPECT_TRUE(*Write(*tier_, {{Key("1"), &g(), 2001, Payload(4.f, 0, 0)}})[0]);
  EXPECT_EQ((*Read(*tier_, {{Key("1"), &g()}})[0])->payload, Payload(4.f, 0, 0));
}

TEST_F(RedisTierTest, StorageTtlIsJittered) {
  std::vector<TierWrite> w;
  for (int i = 0; i < 50; ++i) w.push_back({Key(std::to_string(i)), &g(), 1, Payload(0, 0, 0)});
  for (const auto& r : Write(*tier_, std::move(w))) ASSERT_TRUE(r.ok() && *r);
  std::set<int64_t> ttls;
  for (int i = 0; i < 50; ++i) {
    auto t = server_->Call({"PTTL", Key(std::to_string(i))});
    ASSERT_OK(t);
    EXPECT_GE(t->integer, 99000);
    EXPECT_LE(t->integer, 150000);
    ttls.insert(t->integer / 1000);
  }
  EXPECT_GT(ttls.size(), 10u) << "TTLs spread over [100 s, 150 s)";
}

TEST_F(RedisTierTest, MalformedRecordIsAnErrorNotGarbage) {
  ASSERT_TRUE(
      server_->Call({"HSET", Key("9"), "_ts", "12345678", "a", "xy", "b", "0123456789abcdef"})
          .ok());
  auto r = Read(*tier_, {{Key("9"), &g()}});
  ASSERT_FALSE(r[0].ok());
  EXPECT_NE(r[0].status().message().find("feature a holds 2 bytes"), std::string::npos)
      << r[0].status().message();
  ASSERT_OK(server_->Call({"SET", Key("10"), "x"}));  // WRONGTYPE
  EXPECT_FALSE(Read(*tier_, {{Key("10"), &g()}})[0].ok());
}

TEST_F(RedisTierTest, SchemaVersionsAndDomainsDoNotMix) {
  auto v4 = ParseFeatureSpec(
      std::string(kSpec).replace(std::string(kSpec).find("version: 3"), 10, "version: 4"),
      "t.yaml");
  auto other = ParseFeatureSpec(
      std::string(kSpec).replace(std::string(kSpec).find("domain: t"), 9, "domain: u"), "t.yaml");
  ASSERT_TRUE(v4.ok() && other.ok());
  ASSERT_TRUE(*Write(*tier_, {{Key("5"), &g(), 1, Payload(5.f, 0, 0)}})[0]);
  FeatureStore store(StoreOptions{}, std::make_unique<RedisTier>(client_.get()));
  for (const auto& s : {*v4, *other}) {
    LookupRequest req;
    req.spec = s;
    req.entities["user_id"] = {"5"};
    req.groups = {0};
    EXPECT_EQ(store.LookupSync(req).statuses[0], FeatureStatus::kNotFound);
  }
}

TEST(RedisTierCluster, BatchesSpreadOverThreeMasters) {
  auto spec = ParseFeatureSpec(kSpec, "t.yaml");
  ASSERT_OK(spec);
  auto cluster = RedisCluster::Start(3);
  ASSERT_OK(cluster);
  auto o = redis::ParseSeeds((*cluster)->seeds());
  ASSERT_OK(o);
  auto c = redis::Client::Create(*o);
  ASSERT_OK(c);
  ASSERT_TRUE((*c)->WaitUntilReachable(std::chrono::seconds(10)));
  ASSERT_TRUE((*c)->cluster_mode());
  RedisTier tier(c->get());
  const GroupSpec& g = (*spec)->groups[0];
  std::vector<TierWrite> w;
  std::vector<TierRead> r;
  for (int i = 0; i < 300; ++i) {
    std::string key = RecordKey(**spec, g, std::to_string(i));
    w.push_back({key, &g, 10, Payload(static_cast<float>(i), i, -i)});
    r.push_back({key, &g});
  }
  for (const auto& x : Write(tier, std::move(w))) ASSERT_TRUE(x.ok() && *x);
  auto got = Read(tier, r);
  for (int i = 0; i < 300; ++i) {
    ASSERT_OK(got[static_cast<size_t>(i)]);
    EXPECT_EQ((*got[static_cast<size_t>(i)])->payload, Payload(static_cast<float>(i), i, -i));
  }
  for (size_t n = 0; n < 3; ++n) {
    auto keys = (*cluster)->node(n).Call({"DBSIZE"});
    ASSERT_OK(keys);
    EXPECT_GT(keys->integer, 50) << "node " << n << " holds a share of the records";
  }
}

}  // namespace
}  // namespace dais::features
