// redis::Client against a real 3-master Redis Cluster (started once for the suite).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <thread>

#include "common/status_testing.h"
#include "redis/client.h"
#include "redis/redis_metrics.h"
#include "redis/slot.h"
#include "redis/testing/redis_process.h"

namespace dais::redis {
namespace {

using std::chrono::milliseconds;
using testing::RedisCluster;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

std::string Str(const StatusOr<Reply>& r) {
  return r.ok() ? ReplyToString(*r) : r.status().ToString();
}

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto cluster = RedisCluster::Start(3);
    ASSERT_OK(cluster);
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    StatusOr<ClientOptions> o = ParseSeeds(cluster_->node(0).address());
    ASSERT_OK(o);
    o->command_timeout = milliseconds(1000);
    o->health_check_interval = milliseconds(100);
    o->slot_refresh_interval = milliseconds(60000);  // only MOVED updates the map in these tests
    auto client = Client::Create(*o);
    ASSERT_OK(client);
    client_ = std::move(*client);
    ASSERT_TRUE(client_->WaitUntilReachable(milliseconds(5000)));
  }

  static RedisCluster* cluster_;
  std::unique_ptr<Client> client_;
};

RedisCluster* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, ModeDetected) {
  EXPECT_TRUE(client_->cluster_mode());
  std::vector<std::string> masters = client_->Masters();
  std::sort(masters.begin(), masters.end());
  std::vector<std::string> want = cluster_->addresses();
  std::sort(want.begin(), want.end());
  EXPECT_EQ(masters, want);
}

TEST_F(ClusterTest, SeedListWithSeveralNodes) {
  StatusOr<ClientOptions> o = ParseSeeds("127.0.0.1:1," + cluster_->seeds());
  ASSERT_OK(o);
  auto client = Client::Create(*o);
  ASSERT_OK(client);
  ASSERT_TRUE((*client)->WaitUntilReachable(milliseconds(5000)));
  EXPECT_TRUE((*client)->cluster_mode());
  EXPECT_EQ((*client)->Masters().size(), 3u);
}

TEST_F(ClusterTest, BatchOverAllSlotsInOrder) {
  std::vector<KeyedCommand> sets, gets;
  std::set<uint16_t> slots;
  for (int i = 0; i < 3000; ++i) {
    const std::string k = "spread:" + std::to_string(i);
    slots.insert(KeySlot(k));
    sets.push_back({k, {"SET", k, std::to_string(i * 7)}});
    gets.push_back({k, {"GET", k}});
  }
  EXPECT_GT(slots.size(), 2500u);
  for (const auto& r : client_->RunBatch(std::move(sets))) ASSERT_TRUE(r.ok() && !r->is_error());
  std::vector<StatusOr<Reply>> got = client_->RunBatch(std::move(gets));
  ASSERT_EQ(got.size(), 3000u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_OK(got[i]);
    ASSERT_EQ(got[i]->str, std::to_string(i * 7)) << i;
  }
  // Every master holds some of them.
  for (const std::string& node : client_->Masters()) {
    StatusOr<Reply> n = client_->RunOn(node, {"DBSIZE"});
    ASSERT_OK(n);
    EXPECT_GT(n->integer, 500) << node;
  }
}

TEST_F(ClusterTest, BatchKeepsInputOrderPerNode) {
  std::vector<KeyedCommand> cmds;
  for (int i = 0; i < 500; ++i) {
    const std::string k = "order:" + std::to_string(i);
    cmds.push_back({k, {"SET", k, std::to_string(i)}});
    cmds.push_back({k, {"APPEND", k, "+"}});
    cmds.push_back({k, {"GET", k}});
  }
  std::vector<StatusOr<Reply>> got = client_->RunBatch(std::move(cmds));
  for (int i = 0; i < 500; ++i) {
    ASSERT_OK(got[3 * i + 2]);
    ASSERT_EQ(got[3 * i + 2]->str, std::to_string(i) + "+") << i;
  }
}

TEST_F(ClusterTest, EvalRoutedByFirstKey) {
  const Script script("return redis.call('INCRBY', KEYS[1], ARGV[1])");
  for (const char* key : {"ev:a", "ev:b", "ev:c", "ev:d"}) {
    StatusOr<Reply> r = client_->RunEval(script, {key}, {"5"});
    ASSERT_TRUE(r.ok() && !r->is_error()) << Str(r);
    EXPECT_EQ(r->integer, 5);
  }
  // Keys in different slots: the server refuses (a Reply, not a Status).
  StatusOr<Reply> cross = client_->RunEval(script, {"ev:a", "ev:b"}, {"1"});
  ASSERT_OK(cross);
  EXPECT_TRUE(cross->is_error()) << Str(cross);
}

// Moves one slot from its master to another with IMPORTING/MIGRATING + MIGRATE + SETSLOT NODE
// while a reader thread reads the slot's keys without pause: no read may fail, and both ASK and
// MOVED must have been followed.
TEST_F(ClusterTest, SlotMigrationUnderReadsHasNoFailedReads) {
  const std::string tag = "{migrating}";
  const uint16_t slot = KeySlot(tag);
  StatusOr<size_t> src = cluster_->SlotOwner(slot);
  ASSERT_OK(src);
  const size_t dst = (*src + 1) % cluster_->size();
  StatusOr<std::string> src_id = cluster_->NodeId(*src);
  StatusOr<std::string> dst_id = cluster_->NodeId(dst);
  ASSERT_TRUE(src_id.ok() && dst_id.ok());

  constexpr int kKeys = 40;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(tag + ":" + std::to_string(i));
    ASSERT_OK(client_->Run({keys[i], {"SET", keys[i], "v" + std::to_string(i)}}));
  }

  RedisMetrics& m = RedisMetrics::Get();
  const double ask0 = m.ask.Value(), moved0 = m.moved.Value();
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, failures{0};
  std::string first_failure;
  std::thread reader([&] {
    for (int i = 0; !stop.load(); ++i) {
      const int k = i % kKeys;
      StatusOr<Reply> r = client_->Run({keys[k], {"GET", keys[k]}});
      if (!r.ok() || r->str != "v" + std::to_string(k)) {
        if (failures++ == 0) first_failure = keys[k] + ": " + Str(r);
      }
      ++reads;
    }
  });

  RedisCluster& c = *cluster_;
  auto call = [&](size_t node, const Command& cmd) {
    StatusOr<Reply> r = c.node(node).Call(cmd);
    EXPECT_TRUE(r.ok() && !r->is_error())
        << ReplyToString(r.ok() ? *r : Reply()) << " " << r.status().ToString();
  };
  const std::string slot_s = std::to_string(slot);
  call(dst, {"CLUSTER", "SETSLOT", slot_s, "IMPORTING", *src_id});
  call(*src, {"CLUSTER", "SETSLOT", slot_s, "MIGRATING", *dst_id});
  auto migrate = [&](int from, int to) {
    Command cmd = {"MIGRATE", "127.0.0.1", std::to_string(c.node(dst).port()), "", "0",
                   "5000",    "KEYS"};
    for (int i = from; i < to; ++i) cmd.push_back(keys[i]);
    call(*src, cmd);
  };
  migrate(0, kKeys / 2);
  // Half the keys are on dst: reads of those get ASK.
  EXPECT_TRUE(WaitFor([&] { return m.ask.Value() > ask0; }, milliseconds(3000)));
  migrate(kKeys / 2, kKeys);
  call(dst, {"CLUSTER", "SETSLOT", slot_s, "NODE", *dst_id});
  call(*src, {"CLUSTER", "SETSLOT", slot_s, "NODE", *dst_id});
  for (size_t i = 0; i < c.size(); ++i) {
    if (i != dst && i != *src) call(i, {"CLUSTER", "SETSLOT", slot_s, "NODE", *dst_id});
  }
  // src now answers MOVED: the client updates its map and goes to dst directly.
  EXPECT_TRUE(WaitFor([&] { return m.moved.Value() > moved0; }, milliseconds(3000)));
  const int reads_after_moved = reads.load();
  EXPECT_TRUE(
      WaitFor([&] { return reads.load() > reads_after_moved + 2 * kKeys; }, milliseconds(3000)));
  stop = true;
  reader.join();

  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(reads.load(), 2 * kKeys);
  EXPECT_GT(m.ask.Value(), ask0);
  EXPECT_GT(m.moved.Value(), moved0);
  // Once the map is updated, the slot's reads no longer redirect.
  const double moved1 = m.moved.Value(), ask1 = m.ask.Value();
  for (const std::string& k : keys) ASSERT_OK(client_->Run({k, {"GET", k}}));
  EXPECT_EQ(m.moved.Value(), moved1);
  EXPECT_EQ(m.ask.Value(), ask1);
  EXPECT_EQ(*c.node(dst).Call({"CLUSTER", "COUNTKEYSINSLOT", slot_s}), Reply::Integer(kKeys));
}

}  // namespace
}  // namespace dais::redis
