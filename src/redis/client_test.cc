// redis::Client against a real standalone redis-server (started per test on a free port).
#include "redis/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "common/status_testing.h"
#include "redis/redis_metrics.h"
#include "redis/testing/redis_process.h"

namespace dais::redis {
namespace {

using std::chrono::milliseconds;
using testing::RedisProcess;
using testing::RedisProcessOptions;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisProcess::Start();
    ASSERT_OK(server);
    server_ = std::move(*server);
    client_ = MakeClient(testing::FastClientOptions(server_->address()));
    ASSERT_TRUE(client_->WaitUntilReachable(milliseconds(5000)));
  }

  static std::unique_ptr<Client> MakeClient(ClientOptions o) {
    auto client = Client::Create(std::move(o));
    EXPECT_OK(client);
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::unique_ptr<RedisProcess> server_;
  std::unique_ptr<Client> client_;
};

std::string Str(const StatusOr<Reply>& r) {
  return r.ok() ? ReplyToString(*r) : r.status().ToString();
}

TEST_F(ClientTest, StandaloneModeDetected) {
  EXPECT_FALSE(client_->cluster_mode());
  EXPECT_TRUE(client_->Reachable());
  EXPECT_EQ(client_->Masters(), std::vector<std::string>{server_->address()});
}

TEST_F(ClientTest, SetGet) {
  StatusOr<Reply> set = client_->Run({"k", {"SET", "k", "v1"}});
  ASSERT_OK(set);
  EXPECT_EQ(*set, Reply::Status("OK"));
  EXPECT_EQ(*client_->Run({"k", {"GET", "k"}}), Reply::Bulk("v1"));
  EXPECT_EQ(*client_->Run({"missing", {"GET", "missing"}}), Reply::Nil());
  const std::string binary("a\0\r\nb", 5);
  ASSERT_OK(client_->Run({"b", {"SET", "b", binary}}));
  EXPECT_EQ(*client_->Run({"b", {"GET", "b"}}), Reply::Bulk(binary));
}

TEST_F(ClientTest, HsetHmget) {
  EXPECT_EQ(*client_->Run({"h", {"HSET", "h", "f1", "1", "f2", "2"}}), Reply::Integer(2));
  EXPECT_EQ(*client_->Run({"h", {"HMGET", "h", "f2", "nope", "f1"}}),
            Reply::Array({Reply::Bulk("2"), Reply::Nil(), Reply::Bulk("1")}));
}

TEST_F(ClientTest, BatchOf1000InOrder) {
  std::vector<KeyedCommand> sets, gets;
  for (int i = 0; i < 1000; ++i) {
    const std::string k = "batch:" + std::to_string(i);
    sets.push_back({k, {"SET", k, "value-" + std::to_string(i)}});
    gets.push_back({k, {"GET", k}});
  }
  gets.push_back({"batch:none", {"GET", "batch:none"}});
  for (const StatusOr<Reply>& r : client_->RunBatch(std::move(sets))) {
    ASSERT_TRUE(r.ok() && !r->is_error()) << Str(r);
  }
  std::vector<StatusOr<Reply>> got = client_->RunBatch(std::move(gets));
  ASSERT_EQ(got.size(), 1001u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK(got[i]);
    EXPECT_EQ(got[i]->str, "value-" + std::to_string(i));
  }
  EXPECT_TRUE(got[1000]->is_nil());
  EXPECT_TRUE(client_->RunBatch({}).empty());
}

TEST_F(ClientTest, EvalFallsBackToEvalOnNoScript) {
  const Script script("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
  const Reply want = Reply::Array({Reply::Bulk("counter"), Reply::Bulk("x"), Reply::Integer(1)});
  StatusOr<Reply> r = client_->RunEval(script, {"counter"}, {"x"});
  ASSERT_OK(r);
  EXPECT_EQ(*r, want);
  // EVAL loaded it: now EVALSHA alone works.
  EXPECT_EQ(*server_->Call({"SCRIPT", "EXISTS", script.sha1()}), Reply::Array({Reply::Integer(1)}));
  EXPECT_EQ(client_->RunEval(script, {"counter"}, {"x"})->elements[2], Reply::Integer(2));
  ASSERT_OK(server_->Call({"SCRIPT", "FLUSH"}));
  r = client_->RunEval(script, {"counter"}, {"y"});
  ASSERT_OK(r);
  EXPECT_EQ(r->elements[1], Reply::Bulk("y"));
  EXPECT_EQ(r->elements[2], Reply::Integer(3));
  // A script error is a reply too.
  StatusOr<Reply> bad = client_->RunEval(Script("return redis.call('NOPE')"), {}, {});
  ASSERT_OK(bad);
  EXPECT_TRUE(bad->is_error());
}

TEST_F(ClientTest, ErrorReplyIsAReplyNotAStatus) {
  RedisMetrics& m = RedisMetrics::Get();
  const double before = m.error_reply.Value();
  ASSERT_OK(client_->Run({"s", {"SET", "s", "text"}}));
  StatusOr<Reply> r = client_->Run({"s", {"INCR", "s"}});
  ASSERT_OK(r);
  EXPECT_TRUE(r->is_error());
  EXPECT_NE(r->str.find("ERR"), std::string::npos);
  r = client_->Run({"", {"NOSUCHCOMMAND"}});
  ASSERT_OK(r);
  EXPECT_TRUE(r->is_error());
  EXPECT_EQ(m.error_reply.Value() - before, 2);
  // The connection is still fine.
  EXPECT_EQ(*client_->Run({"s", {"GET", "s"}}), Reply::Bulk("text"));
}

TEST_F(ClientTest, InvalidAndExpiredRequests) {
  EXPECT_EQ(client_->Run({"", {}}).status().code(), StatusCode::kInvalidArgument);
  std::promise<StatusOr<Reply>> p;
  client_->Execute({"k", {"GET", "k"}}, Clock::now() - milliseconds(1),
                   [&](StatusOr<Reply> r) { p.set_value(std::move(r)); });
  EXPECT_EQ(p.get_future().get().status().code(), StatusCode::kDeadlineExceeded);
}

TEST_F(ClientTest, ConcurrentCallersFromManyThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const std::string k = "t" + std::to_string(t) + ":" + std::to_string(i);
        StatusOr<Reply> set = client_->Run({k, {"SET", k, k}});
        StatusOr<Reply> get = client_->Run({k, {"GET", k}});
        if (!set.ok() || !get.ok() || get->str != k) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ClientTest, ExecuteOnAndMasters) {
  StatusOr<Reply> info = client_->RunOn(server_->address(), {"INFO", "memory"});
  ASSERT_OK(info);
  EXPECT_NE(info->str.find("used_memory:"), std::string::npos);
  EXPECT_EQ(client_->RunOn("127.0.0.1:1", {"PING"}).status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, PausedServerAnswersDeadlineExceededAtTheDeadline) {
  ASSERT_OK(server_->Pause());
  const auto start = Clock::now();
  std::promise<StatusOr<Reply>> p;
  client_->Execute({"k", {"GET", "k"}}, start + milliseconds(150),
                   [&](StatusOr<Reply> r) { p.set_value(std::move(r)); });
  StatusOr<Reply> r = p.get_future().get();
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << Str(r);
  EXPECT_GE(elapsed, milliseconds(149));
  EXPECT_LT(elapsed, milliseconds(500));
  // The batch variant too: every element answered at the deadline.
  std::vector<StatusOr<Reply>> batch =
      client_->RunBatch({{"a", {"GET", "a"}}, {"b", {"GET", "b"}}}, milliseconds(100));
  for (const auto& e : batch) EXPECT_EQ(e.status().code(), StatusCode::kDeadlineExceeded);
  // Unanswered health PINGs make it unreachable.
  EXPECT_TRUE(WaitFor([&] { return !client_->Reachable(); }, milliseconds(2000)));
  ASSERT_OK(server_->Resume());
  ASSERT_TRUE(client_->WaitUntilReachable(milliseconds(5000)));
  // The late replies to the abandoned requests are discarded: later replies stay matched.
  std::vector<KeyedCommand> cmds;
  for (int i = 0; i < 20; ++i) {
    const std::string k = "after:" + std::to_string(i);
    cmds.push_back({k, {"SET", k, std::to_string(i)}});
    cmds.push_back({k, {"GET", k}});
  }
  std::vector<StatusOr<Reply>> got = client_->RunBatch(std::move(cmds));
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK(got[2 * i + 1]);
    EXPECT_EQ(got[2 * i + 1]->str, std::to_string(i));
  }
}

TEST_F(ClientTest, StuckConnectionIsDroppedAndReconnected) {
  RedisMetrics& m = RedisMetrics::Get();
  const double reconnects = m.reconnects.Value();
  ASSERT_OK(client_->Run({"k", {"SET", "k", "v"}}));
  ASSERT_OK(server_->Pause());
  EXPECT_EQ(client_->Run({"k", {"GET", "k"}}, milliseconds(50)).status().code(),
            StatusCode::kDeadlineExceeded);
  // stuck_connection_timeout (500 ms) after the deadline, the next health tick drops it.
  EXPECT_TRUE(WaitFor([&] { return m.reconnects.Value() > reconnects; }, milliseconds(3000)));
  ASSERT_OK(server_->Resume());
  ASSERT_TRUE(client_->WaitUntilReachable(milliseconds(5000)));
  EXPECT_EQ(*client_->Run({"k", {"GET", "k"}}), Reply::Bulk("v"));
}

TEST_F(ClientTest, KilledServerFailsFastThenRestartRecovers) {
  RedisMetrics& m = RedisMetrics::Get();
  const double reconnects = m.reconnects.Value();
  ASSERT_OK(server_->Stop());
  const auto start = Clock::now();
  StatusOr<Reply> r = client_->Run({"k", {"GET", "k"}}, milliseconds(2000));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << Str(r);
  EXPECT_LT(Clock::now() - start, milliseconds(500));  // far from the 2 s timeout
  EXPECT_TRUE(WaitFor([&] { return !client_->Reachable(); }, milliseconds(2000)));
  // While down, every command fails fast.
  const auto start2 = Clock::now();
  EXPECT_EQ(client_->Run({"k", {"GET", "k"}}, milliseconds(2000)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start2, milliseconds(300));

  ASSERT_OK(server_->Restart());
  ASSERT_TRUE(client_->WaitUntilReachable(milliseconds(5000)));
  EXPECT_GT(m.reconnects.Value(), reconnects);
  StatusOr<Reply> set = client_->Run({"k", {"SET", "k", "v"}});
  EXPECT_TRUE(set.ok() && !set->is_error()) << Str(set);
  EXPECT_EQ(*client_->Run({"k", {"GET", "k"}}), Reply::Bulk("v"));
}

TEST_F(ClientTest, CreateWithoutServerThenServerAppears) {
  ASSERT_OK(server_->Stop());
  std::unique_ptr<Client> client = MakeClient(testing::FastClientOptions(server_->address()));
  EXPECT_FALSE(client->Reachable());
  const auto start = Clock::now();
  EXPECT_EQ(client->Run({"k", {"GET", "k"}}).status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, milliseconds(300));  // fail fast, not the 1 s timeout
  ASSERT_OK(server_->Restart());
  ASSERT_TRUE(client->WaitUntilReachable(milliseconds(5000)));
  EXPECT_OK(client->Run({"k", {"PING"}}));
}

TEST_F(ClientTest, ShutdownAnswersPendingCallbacks) {
  ASSERT_OK(server_->Pause());
  std::promise<StatusOr<Reply>> p;
  client_->Execute({"k", {"GET", "k"}}, Clock::now() + std::chrono::hours(1),
                   [&](StatusOr<Reply> r) { p.set_value(std::move(r)); });
  client_.reset();
  StatusOr<Reply> r = p.get_future().get();
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("shutting down"), std::string::npos) << Str(r);
  ASSERT_OK(server_->Resume());
}

TEST(ClientAuthTest, WrongPasswordIsAClearError) {
  RedisProcessOptions po;
  po.password = "s3cret";
  auto server = RedisProcess::Start(po);
  ASSERT_OK(server);
  ClientOptions o = testing::FastClientOptions((*server)->address());
  o.password = "wrong";
  auto bad = Client::Create(o);
  ASSERT_OK(bad);
  // The first attempt fails within the connect timeout; then the status says why.
  ASSERT_TRUE(WaitFor(
      [&] {
        return (*bad)->Run({"k", {"GET", "k"}}).status().code() == StatusCode::kUnauthenticated;
      },
      milliseconds(3000)));
  Status s = (*bad)->Run({"k", {"GET", "k"}}).status();
  EXPECT_NE(s.message().find("WRONGPASS"), std::string::npos) << s.ToString();
  EXPECT_FALSE((*bad)->Reachable());

  o.password.clear();  // no password at all: NOAUTH
  auto none = Client::Create(o);
  ASSERT_OK(none);
  ASSERT_TRUE(WaitFor(
      [&] {
        return (*none)->Run({"k", {"GET", "k"}}).status().code() == StatusCode::kUnauthenticated;
      },
      milliseconds(3000)));

  o.password = "s3cret";
  auto good = Client::Create(o);
  ASSERT_OK(good);
  ASSERT_TRUE((*good)->WaitUntilReachable(milliseconds(3000)));
  EXPECT_EQ(*(*good)->Run({"k", {"SET", "k", "v"}}), Reply::Status("OK"));
}

TEST(ClientCreateTest, MalformedOptionsAreInvalidArgument) {
  ClientOptions o;
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.seeds = {"nohost"};
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.seeds = {"127.0.0.1:6379"};
  o.max_redirections = -1;
  EXPECT_EQ(Client::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dais::redis
