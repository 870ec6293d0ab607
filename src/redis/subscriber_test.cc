// redis::Subscriber against a real redis-server: messages, resubscription after a restart,
// errors.
#include "redis/subscriber.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

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
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// PUBLISH until a subscriber counts (the first PUBLISH may race the SUBSCRIBE).
void Publish(RedisProcess& server, const std::string& payload) {
  auto r = server.Call({"PUBLISH", "dais:test", payload});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST(SubscriberTest, ReceivesMessagesOfItsChannelOnly) {
  auto server = RedisProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_EQ(inbox.subscribed.load(), 1);
  const std::string binary("a\0\r\nb", 5);
  Publish(**server, "one");
  ASSERT_TRUE((*server)->Call({"PUBLISH", "other", "not for us"}).ok());
  Publish(**server, binary);
  ASSERT_TRUE(WaitFor([&] { return inbox.Get().size() == 2; }, milliseconds(5000)));
  EXPECT_EQ(inbox.Get(), (std::vector<std::string>{"one", binary}));
}

// Redis restarted: the subscription comes back by itself and says so (the owner drops what it
// may have missed), and messages flow again.
TEST(SubscriberTest, ResubscribesAfterRedisRestarts) {
  auto server = RedisProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  ASSERT_TRUE((*server)->Stop().ok());
  ASSERT_TRUE(WaitFor([&] { return !sub->subscribed(); }, milliseconds(5000)));
  ASSERT_TRUE((*server)->Restart().ok());
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
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Inbox inbox;
  auto sub = Subscribe(testing::FastClientOptions((*server)->address()), &inbox);
  ASSERT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  ASSERT_TRUE((*server)->Pause().ok());
  EXPECT_TRUE(WaitFor([&] { return !sub->subscribed(); }, milliseconds(5000)));
  ASSERT_TRUE((*server)->Resume().ok());
  EXPECT_TRUE(WaitFor([&] { return sub->subscribed(); }, milliseconds(5000)));
  EXPECT_GE(sub->subscriptions(), 2u);
}

TEST(SubscriberTest, PasswordAndBadOptions) {
  RedisProcessOptions po;
  po.password = "s3cret";
  auto server = RedisProcess::Start(po);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
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
