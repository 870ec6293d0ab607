// Cross-process L1 invalidation: the message format, and two feature stores ("processes") over
// one real redis-server, each with its own L1, the publishing tier and a listener.
#include "features/store/invalidation.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/status_testing.h"
#include "features/store/feature_store.h"
#include "features/store/redis_tier.h"
#include "redis/client.h"
#include "redis/testing/redis_process.h"

namespace dais::features {
namespace {

using redis::testing::RedisCluster;
using redis::testing::RedisProcess;
using redis::testing::WaitFor;
using std::chrono::milliseconds;

TEST(InvalidationFormatTest, RoundTripAndTruncation) {
  const std::string binary("k\0\n\xff", 4);
  const std::string long_key(70000, 'x');
  std::string payload = EncodeInvalidation({"dais:t:{user_id=1}:g:v1", "", binary, long_key});
  std::vector<std::string_view> keys;
  ASSERT_OK(DecodeInvalidation(payload, &keys));
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0], "dais:t:{user_id=1}:g:v1");
  EXPECT_EQ(keys[1], "");
  EXPECT_EQ(keys[2], binary);
  EXPECT_EQ(keys[3], long_key);
  EXPECT_OK(DecodeInvalidation("", &keys));

  keys.clear();
  std::string cut = EncodeInvalidation({"a", "bcd"});
  cut.pop_back();  // the second key's last byte
  Status s = DecodeInvalidation(cut, &keys);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 bytes with 2 left"), std::string_view::npos) << s.message();
  EXPECT_EQ(keys, (std::vector<std::string_view>{"a"}));
  keys.clear();
  EXPECT_EQ(DecodeInvalidation(std::string_view("\x01\x00", 2), &keys).code(),
            StatusCode::kInvalidArgument);
}

// The publishing tier over a scripted tier: only the keys the tier answered without error are
// published, and the caller hears back after the message is out.
class ScriptedTier : public OnlineTier {
 public:
  void Read(std::vector<TierRead>, Deadline, ReadCallback cb) override { cb({}, {}); }
  void Write(std::vector<TierWrite> w, Deadline, WriteCallback cb) override {
    std::vector<StatusOr<bool>> r;
    for (const auto& x : w) {
      if (x.key == "bad") {
        r.emplace_back(Unavailable("down"));
      } else {
        r.emplace_back(x.key != "older");
      }
    }
    cb(std::move(r));
  }
  bool Healthy() const override { return true; }
  const char* name() const override { return "scripted"; }
};

TEST(PublishingTierTest, PublishesTheAnsweredKeysBeforeCallingBack) {
  std::vector<std::string> order;
  std::function<void()> pending;
  PublishingTier tier(std::make_unique<ScriptedTier>(),
                      [&](std::string payload, std::function<void()> done) {
                        std::vector<std::string_view> keys;
                        EXPECT_OK(DecodeInvalidation(payload, &keys));
                        for (auto k : keys) order.push_back("published " + std::string(k));
                        pending = std::move(done);
                      });
  std::vector<TierWrite> w(3);
  w[0].key = "k1";
  w[1].key = "bad";
  w[2].key = "older";
  bool called = false;
  tier.Write(std::move(w), std::chrono::steady_clock::now(), [&](std::vector<StatusOr<bool>> r) {
    called = true;
    ASSERT_EQ(r.size(), 3u);
    EXPECT_TRUE(r[0].ok() && *r[0]);
    EXPECT_FALSE(r[1].ok());
    EXPECT_TRUE(r[2].ok() && !*r[2]);
  });
  EXPECT_EQ(order, (std::vector<std::string>{"published k1", "published older"}));
  EXPECT_FALSE(called);  // not before the message is out
  ASSERT_TRUE(pending);
  pending();
  EXPECT_TRUE(called);

  // Nothing written: nothing published, called back at once.
  bool empty_called = false;
  std::vector<TierWrite> bad(1);
  bad[0].key = "bad";
  pending = nullptr;
  tier.Write(std::move(bad), std::chrono::steady_clock::now(),
             [&](std::vector<StatusOr<bool>>) { empty_called = true; });
  EXPECT_TRUE(empty_called);
  EXPECT_FALSE(pending);
}

constexpr const char* kSpec = R"(
domain: t
entities: [{name: user_id, key_type: int64}]
feature_groups:
  - name: g
    entity: user_id
    version: 1
    features:
      - {name: a, dtype: FP32, default: -1}
)";

// One "process": its own Redis client, store (L1 TTL 10 minutes: only invalidation makes a
// copy go), publishing tier and, when `listen`, an invalidation listener.
struct Node {
  Node(const std::string& address, bool listen) {
    const redis::ClientOptions o = redis::testing::FastClientOptions(address);
    auto c = redis::Client::Create(o);
    EXPECT_OK(c);
    client = std::move(c).value();
    EXPECT_TRUE(client->WaitUntilReachable(std::chrono::seconds(5)));
    StoreOptions so;
    so.l1_ttl = std::chrono::minutes(10);
    store = std::make_unique<FeatureStore>(
        so, std::make_unique<PublishingTier>(std::make_unique<RedisTier>(client.get()),
                                             RedisPublisher(client.get())));
    if (listen) {
      auto l = InvalidationListener::Start(o, store.get());
      EXPECT_OK(l);
      listener = std::move(l).value();
      EXPECT_TRUE(WaitFor([&] { return listener->subscribed(); }, milliseconds(5000)));
    }
  }
  ~Node() {
    listener.reset();
    client.reset();  // answers pending calls through the store's callbacks first
    store.reset();
  }
  std::unique_ptr<redis::Client> client;
  std::unique_ptr<FeatureStore> store;
  std::unique_ptr<InvalidationListener> listener;
};

class InvalidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ParseFeatureSpec(kSpec, "t.yaml");
    ASSERT_OK(spec);
    spec_ = *spec;
    auto server = RedisProcess::Start();
    ASSERT_OK(server);
    server_ = std::move(server).value();
  }

  float Read(Node& n, const std::string& id) {
    LookupRequest r;
    r.spec = spec_;
    r.entities["user_id"] = {id};
    r.groups = {0};
    r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    LookupResult res = n.store->LookupSync(std::move(r));
    float v;
    std::string_view b = res.Value(0, 0, 0, false);
    EXPECT_EQ(b.size(), 4u);
    std::memcpy(&v, b.data(), 4);
    return v;
  }
  void Push(Node& n, const std::string& id, float v, int64_t t) {
    std::string p(4, '\0');
    std::memcpy(p.data(), &v, 4);
    auto r = n.store->PushSync(spec_, {PushRow{0, id, t, p}});
    ASSERT_TRUE(r[0].ok() && *r[0]) << (r[0].ok() ? "older" : r[0].status().message());
  }

  FeatureSpecPtr spec_;
  std::unique_ptr<RedisProcess> server_;
};

TEST_F(InvalidationTest, APushThroughOneProcessReachesTheOthersL1) {
  Node a(server_->address(), true), b(server_->address(), true), deaf(server_->address(), false);
  const int64_t t0 = UnixNowUs();
  Push(a, "7", 1.f, t0);
  // The first push's message reaches b too (nothing to drop yet); wait for it so that it cannot
  // arrive after b's read and drop the copy this test wants b to hold.
  ASSERT_TRUE(WaitFor([&] { return b.listener->messages() >= 1; }, milliseconds(5000)));
  EXPECT_EQ(Read(b, "7"), 1.f);  // now in b's L1
  EXPECT_EQ(Read(deaf, "7"), 1.f);
  EXPECT_EQ(b.store->l1().entries(), 1u);
  Push(a, "7", 2.f, t0 + 1);
  // b drops its copy when the message arrives and reads Redis again.
  EXPECT_TRUE(WaitFor([&] { return Read(b, "7") == 2.f; }, milliseconds(5000)));
  // Without a listener the old copy stays until the L1 TTL (10 minutes here).
  EXPECT_EQ(Read(deaf, "7"), 1.f);
  // The writer itself, and writes that changed nothing (older) are harmless.
  EXPECT_EQ(Read(a, "7"), 2.f);
}

TEST_F(InvalidationTest, ResubscribingDropsTheWholeL1) {
  Node b(server_->address(), true);
  Push(b, "1", 5.f, UnixNowUs());
  Push(b, "2", 6.f, UnixNowUs());
  // b hears its own pushes too: let those messages land before filling the L1.
  ASSERT_TRUE(WaitFor([&] { return b.listener->messages() >= 2; }, milliseconds(5000)));
  EXPECT_EQ(Read(b, "1"), 5.f);
  EXPECT_EQ(Read(b, "2"), 6.f);
  ASSERT_EQ(b.store->l1().entries(), 2u);
  // Redis restarts without persistence: messages sent meanwhile would be lost, so the listener's
  // resubscription empties the L1 (and the records are gone from Redis as well).
  ASSERT_OK(server_->Restart());
  ASSERT_TRUE(WaitFor([&] { return b.store->l1().entries() == 0u; }, milliseconds(5000)));
  ASSERT_TRUE(WaitFor([&] { return b.listener->subscribed(); }, milliseconds(5000)));
  ASSERT_TRUE(WaitFor([&] { return b.store->Healthy(); }, milliseconds(5000)));
  EXPECT_EQ(Read(b, "1"), -1.f);  // NOT_FOUND: the default, not the dropped copy
}

// Redis Cluster: the writer publishes through any master, the reader subscribes on another; a
// classic PUBLISH crosses the cluster bus. Records spread over the three masters' slots.
TEST_F(InvalidationTest, MessagesCrossARedisCluster) {
  auto cluster = RedisCluster::Start(3);
  ASSERT_OK(cluster);
  std::vector<std::string> n = (*cluster)->addresses();
  Node a(n[0] + "," + n[1] + "," + n[2], true);
  Node b(n[2] + "," + n[1] + "," + n[0], true);  // subscribes on another node than a
  ASSERT_TRUE(a.client->cluster_mode());
  const int64_t t0 = UnixNowUs();
  for (int i = 0; i < 20; ++i) Push(a, std::to_string(i), 1.f, t0);
  ASSERT_TRUE(WaitFor([&] { return b.listener->messages() >= 20; }, milliseconds(5000)));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Read(b, std::to_string(i)), 1.f);
  ASSERT_EQ(b.store->l1().entries(), 20u);
  for (int i = 0; i < 20; ++i) Push(a, std::to_string(i), 2.f, t0 + 1);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(WaitFor([&] { return Read(b, std::to_string(i)) == 2.f; }, milliseconds(5000)))
        << "entity " << i;
  }
}

}  // namespace
}  // namespace dais::features
