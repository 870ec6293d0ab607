// redis::Subscriber against a real redis-server: messages, resubscription after a restart,
// reconnection with backoff while the server is down, seed cycling, the connect deadline over a
// silent handshake, stopping, errors.
#include "redis/subscriber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status_testing.h"
#include "redis/testing/redis_process.h"

namespace dais::redis {
namespace {

using std::chrono::milliseconds;
using testing::RedisProcess;
using testing::RedisProcessOptions;
using testing::WaitFor;

struct Inbox {
  std::mutex mu;
  std::vector<std::string> messages;
  std::atomic<int> subscribed{0};
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> l(mu);
    return messages;
  }
};

std::unique_ptr<Subscriber> Subscribe(const ClientOptions& o, Inbox* inbox) {
  auto s = Subscriber::Create(
      o, "dais:test",
      [inbox](std::string_view m) {
        std::lock_guard<std::mutex> l(inbox->mu);
        inbox->messages.emplace_back(m);
      },
      [inbox] { ++inbox->subscribed; });
  EXPECT_OK(s);
  return s.ok() ? std::move(*s) : nullptr;
}

// PUBLISH until a subscriber counts (the first PUBLISH may race the SUBSCRIBE).
void Publish(RedisProcess& server, const std::string& payload) {
  auto r = server.Call({"PUBLISH", "dais:test", payload});
  ASSERT_OK(r);
}

TEST(SubscriberTest, ReceivesMessagesOfItsChannelOnly) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_EQ(inbox.subscribed.load(), 1);
  const std::string binary("a\0\r\nb", 5);
  Publish(**server, "one");
  ASSERT_OK((*server)->Call({"PUBLISH", "other", "not for us"}));
  Publish(**server, binary);
  ASSERT_TRUE(WaitFor([&] { return inbox.Get().size() == 2; }, milliseconds(5000)));
  EXPECT_EQ(inbox.Get(), (std::vector<std::string>{"one", binary}));
}

// Redis restarted: the subscription comes back by itself and says so (the owner drops what it
// may have missed), and messages flow again.
TEST(SubscriberTest, ResubscribesAfterRedisRestarts) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  ASSERT_OK((*server)->Stop());
  ASSERT_TRUE(WaitFor([&] { return !sub->subscribed(); }, milliseconds(5000)));
  ASSERT_OK((*server)->Restart());
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_EQ(sub->subscriptions(), 2u);
  EXPECT_EQ(inbox.subscribed.load(), 2);
  Publish(**server, "after");
  ASSERT_TRUE(WaitFor([&] { return !inbox.Get().empty(); }, milliseconds(5000)));
  EXPECT_EQ(inbox.Get().back(), "after");
}

// A server that stops answering (SIGSTOP): the missing PONG drops the connection.
TEST(SubscriberTest, SilentServerIsDetectedByPing) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  ASSERT_OK((*server)->Pause());
  EXPECT_TRUE(WaitFor([&] { return !sub->subscribed(); }, milliseconds(5000)));
  ASSERT_OK((*server)->Resume());
  EXPECT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_GE(sub->subscriptions(), 2u);
}

// Redis down when the subscriber starts: it keeps reconnecting (connection refused, backoff up to
// reconnect_backoff_max) and subscribes, once, soon after the server comes up.
TEST(SubscriberTest, SubscribesOnceRedisComesUp) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  ASSERT_OK((*server)->Stop());
  Inbox inbox;
  ClientOptions o = testing::FastClientOptions((*server)->address());
  auto sub = Subscribe(o, &inbox);
  // Long enough for several refused attempts and for the backoff to reach its cap.
  EXPECT_FALSE(WaitFor([&] { return sub->subscribed(); }, milliseconds(600)));
  ASSERT_OK((*server)->Restart());
  const auto up = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  // Within one capped (jittered) backoff plus a connect, with room for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - up,
            o.reconnect_backoff_max * 1.2 + milliseconds(1000));
  EXPECT_EQ(sub->subscriptions(), 1u);
  EXPECT_EQ(inbox.subscribed.load(), 1);
  Publish(**server, "up");
  ASSERT_TRUE(WaitFor([&] { return inbox.Get().size() == 1; }, milliseconds(5000)));
}

// Several seeds: a dead one is skipped, and when the serving node goes away the subscription
// moves to the next seed that answers.
TEST(SubscriberTest, CyclesThroughSeeds) {
  auto a = RedisProcess::Start();
  ASSERT_OK(a);
  auto b = RedisProcess::Start();
  ASSERT_OK(b);
  ASSERT_OK_AND_ASSIGN(int dead_port, testing::PickFreePort());
  ClientOptions o = testing::FastClientOptions("127.0.0.1:" + std::to_string(dead_port) + "," +
                                               (*a)->address() + "," + (*b)->address());
  Inbox inbox;
  auto sub = Subscribe(o, &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  Publish(**a, "on a");
  ASSERT_TRUE(WaitFor([&] { return inbox.Get().size() == 1; }, milliseconds(5000)));
  ASSERT_OK((*a)->Stop());
  ASSERT_TRUE(
      WaitFor([&] { return sub->subscriptions() == 2 && sub->subscribed(); }, milliseconds(5000)));
  EXPECT_EQ(inbox.subscribed.load(), 2);
  Publish(**b, "on b");
  ASSERT_TRUE(WaitFor([&] { return inbox.Get().size() == 2; }, milliseconds(5000)));
  EXPECT_EQ(inbox.Get().back(), "on b");
}

// A server that accepts the connection but never answers the SUBSCRIBE (SIGSTOP before the
// subscriber starts): connect_timeout covers the handshake, so it keeps retrying, and subscribes
// once the server answers again.
TEST(SubscriberTest, ConnectTimeoutCoversTheHandshake) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  ASSERT_OK((*server)->Pause());
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  EXPECT_FALSE(WaitFor([&] { return sub->subscribed(); }, milliseconds(1000)));
  ASSERT_OK((*server)->Resume());
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_EQ(sub->subscriptions(), 1u);
  // The handshake timed out and was retried while the server was paused (connect_timeout 300 ms
  // in a 1 s pause): the server accepted several connections, not the first one only.
  auto info = (*server)->Call({"INFO", "stats"});
  ASSERT_OK(info);
  const std::string key = "total_connections_received:";
  const size_t at = info->str.find(key);
  ASSERT_NE(at, std::string::npos) << info->str;
  EXPECT_GE(std::stoll(info->str.substr(at + key.size())), 3) << info->str;  // + this call
}

// The destructor returns promptly whatever the connection is doing (in a handshake with a silent
// server, or receiving messages), and no callback runs after it returned.
TEST(SubscriberTest, DestructorStopsPromptlyAndSilences) {
  auto server = RedisProcess::Start();
  ASSERT_OK(server);
  ASSERT_OK((*server)->Pause());
  Inbox silent;
  auto waiting = Subscribe(testing::FastClientOptions((*server)->address()), &silent);
  auto start = std::chrono::steady_clock::now();
  waiting.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  ASSERT_OK((*server)->Resume());

  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  std::atomic<bool> done{false};
  std::thread publisher([&done, address = (*server)->address()] {
    for (int i = 0; !done; ++i) {
      if (!testing::BlockingCall(address, {"PUBLISH", "dais:test", std::to_string(i)}).ok()) break;
    }
  });
  // EXPECT, not ASSERT, until the publisher is joined.
  EXPECT_TRUE(WaitFor([&] { return inbox.Get().size() >= 10; }, milliseconds(5000)));
  start = std::chrono::steady_clock::now();
  sub.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  const size_t received = inbox.Get().size();
  // The publisher keeps publishing meanwhile; nothing may arrive any more.
  EXPECT_OK((*server)->Call({"PUBLISH", "dais:test", "after the destructor"}));
  done = true;
  publisher.join();
  EXPECT_EQ(inbox.Get().size(), received);
}

TEST(SubscriberTest, PasswordAndBadOptions) {
  RedisProcessOptions po;
  po.password = "s3cret";
  auto server = RedisProcess::Start(po);
  ASSERT_OK(server);
  Inbox good, bad;
  ClientOptions o = testing::FastClientOptions((*server)->address());
  o.password = "s3cret";
  auto sub = Subscribe(o, &good);
  o.password = "wrong";
  auto refused = Subscribe(o, &bad);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  Publish(**server, "x");
  ASSERT_TRUE(WaitFor([&] { return good.Get().size() == 1; }, milliseconds(5000)));
  EXPECT_FALSE(refused->subscribed());
  EXPECT_EQ(bad.subscribed.load(), 0);

  EXPECT_EQ(Subscriber::Create(o, "", nullptr, nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Subscriber::Create(ClientOptions{}, "c", nullptr, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dais::redis
