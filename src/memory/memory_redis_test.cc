// Vector memory on a real redis-server (and a Redis Cluster): what a write stores, a restart
// that restores collections and points from Redis, deletes, and expired points forgotten.
#include <gtest/gtest.h>

#include <future>

#include "memory/memory_service.h"
#include "memory/redis_store.h"
#include "redis/testing/redis_process.h"

namespace dais::memory {
namespace {

using redis::testing::RedisCluster;
using redis::testing::RedisProcess;

Status Wait(const std::function<void(MemoryService::Done)>& op) {
  std::promise<Status> p;
  op([&](Status s) { p.set_value(s); });
  return p.get_future().get();
}

CollectionSpecPtr Spec() {
  return *ParseCollectionSpec(
      R"({"name": "items", "tenant": "shop", "dimension": 3, "metric": "inner_product",
          "shards": 4, "payload": {"cat": "string"}})");
}

std::vector<Point> Points(int n) {
  std::vector<Point> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({"p" + std::to_string(i), {static_cast<float>(i), 1, 0}, {{"cat", "c"}}});
  }
  return out;
}

void CheckRestartKeepsPoints(redis::Client* client) {
  RedisStore store(client);
  {
    MemoryService service(&store);
    ASSERT_TRUE(service.Create(Spec()).ok());
    ASSERT_TRUE(Wait([&](auto d) { service.Upsert("items", Points(100), d); }).ok());
    ASSERT_TRUE(Wait([&](auto d) { service.Delete("items", {"p99", "p7"}, d); }).ok());
  }
  MemoryService restarted(&store);
  size_t reported = 0;
  ASSERT_TRUE(restarted.Restore([&](const std::string&, int, size_t n) { reported += n; }).ok());
  ASSERT_EQ(restarted.Stats().size(), 1u);
  EXPECT_EQ(restarted.Stats()[0].points, 98u);
  EXPECT_EQ(reported, 98u);
  SearchRequest r;
  r.vector = {1, 0, 0};
  r.k = 2;
  auto hits = restarted.Search("items", r);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ((*hits)[0].id, "p98");  // p99 was deleted
  EXPECT_EQ((*hits)[1].id, "p97");
  auto got = restarted.Get("items", {"p5"}, true);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].vector, (std::vector<float>{5, 1, 0}));
  EXPECT_EQ(PayloadJson((*got)[0].payload), R"({"cat":"c"})");
  // A later write is applied over the restored one (its sequence continues in Redis).
  ASSERT_TRUE(Wait([&](auto d) { restarted.Upsert("items", {{"p5", {500, 1, 0}, {}}}, d); }).ok());
  hits = restarted.Search("items", r);
  EXPECT_EQ((*hits)[0].id, "p5");
  ASSERT_TRUE(restarted.Drop("items").ok());
  MemoryService empty(&store);
  ASSERT_TRUE(empty.Restore().ok());
  EXPECT_TRUE(empty.Stats().empty());
}

TEST(MemoryRedisTest, RestartRestoresFromRedis) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().message();
  auto client = redis::Client::Create(redis::testing::FastClientOptions((*redis)->address()));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitUntilReachable(std::chrono::seconds(5)));
  CheckRestartKeepsPoints(client->get());
  // The shard keys carry the tenant and the hash tag.
  auto keys = (*redis)->Call({"KEYS", "dais:shop:mem:*"});
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->elements.empty()) << "dropped collections leave no keys";
}

TEST(MemoryRedisTest, ShardsSpreadOverARedisCluster) {
  auto cluster = RedisCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  auto client = redis::Client::Create(redis::testing::FastClientOptions((*cluster)->seeds()));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitUntilReachable(std::chrono::seconds(5)));
  CheckRestartKeepsPoints(client->get());
}

// Two processes on one Redis: each applies the other's writes from the shards' logs.
TEST(MemoryRedisTest, ReplicasCatchUpFromTheLog) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok());
  auto client = redis::Client::Create(redis::testing::FastClientOptions((*redis)->address()));
  ASSERT_TRUE((*client)->WaitUntilReachable(std::chrono::seconds(5)));
  RedisStore store(client->get());
  MemoryService a(&store);
  ASSERT_TRUE(a.Create(Spec()).ok());
  ASSERT_TRUE(Wait([&](auto d) { a.Upsert("items", Points(10), d); }).ok());
  MemoryService b(&store);
  ASSERT_TRUE(b.Restore().ok());
  EXPECT_EQ(b.Stats()[0].points, 10u);
  EXPECT_EQ(b.CatchUp(), 0u);  // nothing written since it loaded
  // A batch larger than one log entry (1,000 points), an update and a delete, written by a.
  ASSERT_TRUE(Wait([&](auto d) { a.Upsert("items", Points(2500), d); }).ok());
  ASSERT_TRUE(Wait([&](auto d) { a.Upsert("items", {{"p3", {-9, 1, 0}, {}}}, d); }).ok());
  ASSERT_TRUE(Wait([&](auto d) { a.Delete("items", {"p0", "p1"}, d); }).ok());
  EXPECT_GT(b.CatchUp(), 2500u);
  EXPECT_EQ(b.Stats()[0].points, 2498u);
  EXPECT_EQ(b.Get("items", {"p3"}, true)->at(0).vector, (std::vector<float>{-9, 1, 0}));
  EXPECT_TRUE(b.Get("items", {"p0"}, false)->empty());
  // a reads its own writes back from the log: nothing changes.
  const size_t before = a.Stats()[0].points;
  a.CatchUp();
  EXPECT_EQ(a.Stats()[0].points, before);
  EXPECT_EQ(a.Get("items", {"p3"}, true)->at(0).vector, (std::vector<float>{-9, 1, 0}));
  // And the other way round.
  ASSERT_TRUE(Wait([&](auto d) { b.Upsert("items", {{"from-b", {0, 0, 1}, {}}}, d); }).ok());
  a.CatchUp();
  EXPECT_EQ(a.Get("items", {"from-b"}, false)->size(), 1u);
  // b falls behind a log trimmed past what it read: it notices the gap and loads again.
  ASSERT_TRUE(Wait([&](auto d) { a.Delete("items", {"p2", "p2000"}, d); }).ok());
  for (int shard = 0; shard < 4; ++shard) {
    const std::string log = RedisStore::ShardKey(*Spec(), shard, "log");
    ASSERT_TRUE((*redis)->Call({"XTRIM", log, "MAXLEN", "0"}).ok());
  }
  ASSERT_TRUE(Wait([&](auto d) { a.Upsert("items", Points(12), d); }).ok());  // p0, p1 again
  b.CatchUp();
  EXPECT_EQ(b.Stats()[0].points, a.Stats()[0].points);
  EXPECT_EQ(b.Get("items", {"p2"}, false)->size(), 1u);    // rewritten after the deletion
  EXPECT_TRUE(b.Get("items", {"p2000"}, false)->empty());  // deleted in the gap
  EXPECT_EQ(b.Get("items", {"p12"}, false)->size(), 1u);
  ASSERT_TRUE(Wait([&](auto d) { a.Delete("items", {"p12"}, d); }).ok());
  b.CatchUp();  // and follows the log again from where it reloaded
  EXPECT_TRUE(b.Get("items", {"p12"}, false)->empty());
}

TEST(MemoryRedisTest, ANodeHoldsOnlyTheShardsItIsAssigned) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok());
  auto client = redis::Client::Create(redis::testing::FastClientOptions((*redis)->address()));
  ASSERT_TRUE((*client)->WaitUntilReachable(std::chrono::seconds(5)));
  RedisStore store(client->get());
  MemoryService writer(&store);
  ASSERT_TRUE(writer.Create(Spec()).ok());
  ASSERT_TRUE(Wait([&](auto d) { writer.Upsert("items", Points(200), d); }).ok());
  MemoryService node(&store);
  EXPECT_EQ(MemoryService(nullptr).Host(Spec(), 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(node.Host(Spec(), 4).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(node.Host(Spec(), 1).ok());
  ASSERT_TRUE(node.Host(Spec(), 3).ok());
  size_t in_1_3 = 0;
  for (int i = 0; i < 200; ++i) {
    const int s = ShardOf("p" + std::to_string(i), 4);
    in_1_3 += s == 1 || s == 3;
  }
  ASSERT_EQ(node.Stats().size(), 1u);
  EXPECT_EQ(node.Stats()[0].points, in_1_3);
  EXPECT_EQ(node.Stats()[0].held, (std::vector<int>{1, 3}));
  SearchRequest r;
  r.vector = {1, 0, 0};
  r.k = 300;
  // All shards asked (none named): refused naming what is missing; the held ones answer.
  auto all = node.Search("items", r);
  ASSERT_EQ(all.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(all.status().message().find("shard(s) 0,2"), std::string::npos);
  r.shards = {1, 3};
  auto held = node.Search("items", r);
  ASSERT_TRUE(held.ok());
  ASSERT_FALSE(held->empty());
  for (const auto& h : *held) EXPECT_TRUE(ShardOf(h.id, 4) == 1 || ShardOf(h.id, 4) == 3);
  r.shards = {3};
  auto three = node.Search("items", r);
  ASSERT_TRUE(three.ok());
  for (const auto& h : *three) EXPECT_EQ(ShardOf(h.id, 4), 3);
  // Get: ids of shards not asked are skipped; an id of a shard not held is refused.
  std::string in0, in1;
  for (int i = 0; in0.empty() || in1.empty(); ++i) {
    const std::string id = "p" + std::to_string(i);
    if (ShardOf(id, 4) == 0) in0 = id;
    if (ShardOf(id, 4) == 1) in1 = id;
  }
  EXPECT_EQ(node.Get("items", {in0, in1}, false, {1})->size(), 1u);
  EXPECT_EQ(node.Get("items", {in0}, false).status().code(), StatusCode::kUnavailable);
  // A write through the node for every shard: stored for all, applied to the held ones, and
  // the writer (which holds every shard) sees it through the log.
  ASSERT_TRUE(Wait([&](auto d) {
                node.Upsert("items", {{in0, {9, 0, 0}, {}}, {in1, {9, 0, 0}, {}}}, d);
              }).ok());
  EXPECT_EQ(node.Get("items", {in1}, true)->at(0).vector, (std::vector<float>{9, 0, 0}));
  writer.CatchUp();
  EXPECT_EQ(writer.Get("items", {in0}, true)->at(0).vector, (std::vector<float>{9, 0, 0}));
  // And follows the writer's writes to its shards.
  ASSERT_TRUE(Wait([&](auto d) { writer.Delete("items", {in1}, d); }).ok());
  node.CatchUp();
  EXPECT_TRUE(node.Get("items", {in1}, false)->empty());
  node.Unhost("items", 1);
  EXPECT_EQ(node.Stats()[0].held, (std::vector<int>{3}));
  node.Unhost("items", 3);
  EXPECT_TRUE(node.Stats().empty());
  EXPECT_EQ(node.Spec("items").status().code(), StatusCode::kNotFound);
}

TEST(MemoryRedisTest, ExpiredPointsAreForgottenInRedis) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis.ok());
  auto client = redis::Client::Create(redis::testing::FastClientOptions((*redis)->address()));
  ASSERT_TRUE((*client)->WaitUntilReachable(std::chrono::seconds(5)));
  RedisStore store(client->get());
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count() -
                60'000;  // the points were written a minute ago
  MemoryService service(&store, {std::chrono::seconds(2), [&] { return now; }, ""});
  auto spec = *ParseCollectionSpec(R"({"name": "t", "dimension": 2, "ttl": "30s"})");
  ASSERT_TRUE(service.Create(spec).ok());
  ASSERT_TRUE(Wait([&](auto d) { service.Upsert("t", {{"a", {1, 0}, {}}}, d); }).ok());
  const std::string key = RedisStore::ShardKey(*spec, 0, "points");
  EXPECT_EQ((*redis)->Call({"HLEN", key})->integer, 1);
  now += 31'000;
  service.Sweep();
  EXPECT_TRUE(redis::testing::WaitFor(
      [&] {
        return (*redis)->Call({"HLEN", key})->integer == 0;
      },
      std::chrono::seconds(5)));
}

}  // namespace
}  // namespace dais::memory
