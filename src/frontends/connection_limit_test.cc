#include "frontends/connection_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <thread>

#include "common/status_testing.h"
#include "frontends/listen.h"

namespace dais::frontends {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

TEST(ConnectionLimiterTest, AdmitsUpToTheLimitThenRefusesWhenNoneIsIdle) {
  ConnectionLimiter limiter("test_refuse", 2);
  auto a = limiter.Admit();
  auto b = limiter.Admit();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(limiter.Admit(), nullptr);
  EXPECT_EQ(limiter.open(), 2);
  a.reset();
  EXPECT_EQ(limiter.open(), 1);
  EXPECT_NE(limiter.Admit(), nullptr);
}

TEST(ConnectionLimiterTest, AtTheLimitTheLongestIdleIsClosedToMakeRoom) {
  ConnectionLimiter limiter("test_evict", 3);
  std::vector<std::unique_ptr<ConnectionLimiter::Slot>> slots;
  std::vector<int> closed;
  for (int i = 0; i < 3; ++i) slots.push_back(limiter.Admit());
  slots[1]->Idle([&] { closed.push_back(1); });
  slots[0]->Idle([&] { closed.push_back(0); });
  slots[2]->Idle([&] { closed.push_back(2); });
  slots[1]->Busy();  // took a request: no longer a candidate
  auto d = limiter.Admit();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(closed, std::vector<int>({0}));  // idle the longest, and still idle
  auto e = limiter.Admit();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(closed, std::vector<int>({0, 2}));
  // Nothing idle now: refused.
  EXPECT_EQ(limiter.Admit(), nullptr);
  EXPECT_FALSE(limiter.EvictOne());
}

// Issue 32: 1,030 connections that sent a head and then nothing locked every new client out.
// With none idle, the receiving connection with the lowest byte rate makes room.
TEST(ConnectionLimiterTest, WithNoneIdleTheSlowestReceivingIsClosed) {
  ConnectionLimiter limiter("test_receiving", 3);
  std::vector<int> closed;
  auto fast = limiter.Admit(), slow = limiter.Admit(), busy = limiter.Admit();
  fast->Receiving([&] { closed.push_back(0); });
  slow->Receiving([&] { closed.push_back(1); });
  busy->Busy();
  // Both receiving for a second or more: the one with fewer bytes goes first.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  fast->Progress(1 << 20);
  slow->Progress(10);
  auto d = limiter.Admit();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(closed, std::vector<int>({1}));
  fast->Busy();  // its request is complete: no longer a candidate
  EXPECT_EQ(limiter.Admit(), nullptr);
  EXPECT_EQ(closed, std::vector<int>({1}));
}

// A connection whose close was called (it closes on its own thread, later) is never chosen again,
// even when its request head arrives in between: one close, one newcomer.
TEST(ConnectionLimiterTest, AnEvictedConnectionIsNotEvictedTwice) {
  ConnectionLimiter limiter("test_evicted_once", 1);
  int closes = 0;
  auto a = limiter.Admit();
  a->Idle([&] { ++closes; });
  auto b = limiter.Admit();  // closes a (not yet gone)
  ASSERT_NE(b, nullptr);
  b->Busy();
  a->Receiving([&] { ++closes; });  // its head arrived before the close ran
  EXPECT_EQ(limiter.Admit(), nullptr);
  EXPECT_EQ(closes, 1);
}

// The closer is set once (no allocation per request): Idle() and Receiving() without one keep
// it, and an evicted connection's closer runs once whichever state it was taken in.
TEST(ConnectionLimiterTest, ACloserSetOnceServesEveryState) {
  ConnectionLimiter limiter("test_closer_once", 1);
  std::vector<int> closed;
  auto a = limiter.Admit();
  a->SetCloser([&] { closed.push_back(0); });
  a->Receiving();  // a whole request, the closer given once
  a->Busy();
  a->Idle();
  auto b = limiter.Admit();  // at the limit: a, idle, is closed
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(closed, std::vector<int>({0}));
  a.reset();
  b->SetCloser([&] { closed.push_back(1); });
  b->Receiving();  // none idle: the receiving one goes
  auto c = limiter.Admit();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(closed, std::vector<int>({0, 1}));
  b->Idle();  // its request ended before the close ran: never chosen again
  c->Busy();
  EXPECT_EQ(limiter.Admit(), nullptr);
  EXPECT_EQ(closed, std::vector<int>({0, 1}));
  // A connection without a closer cannot be closed for room: never taken (nothing to call).
  b.reset();
  c.reset();
  auto d = limiter.Admit();
  ASSERT_NE(d, nullptr);
  d->Idle();
  d->Receiving();
  EXPECT_EQ(limiter.Admit(), nullptr);
}

TEST(ConnectionLimiterTest, PerAddressCapRefusesOnlyThatAddress) {
  ConnectionLimiter limiter("test_per_address", 10);
  limiter.set_max_per_address(2);
  auto a = limiter.Admit("10.0.0.1"), b = limiter.Admit("10.0.0.1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(limiter.Admit("10.0.0.1"), nullptr);
  auto other = limiter.Admit("10.0.0.2");
  EXPECT_NE(other, nullptr);
  a.reset();
  EXPECT_NE(limiter.Admit("10.0.0.1"), nullptr);
}

// Issue 31: 600 silent connections closed a client sending a request every 100 ms; a connection
// that has served requests now outlives any number of silent newcomers.
TEST(ConnectionLimiterTest, SilentConnectionsAreClosedBeforeOnesThatServed) {
  ConnectionLimiter limiter("test_silent", 3);
  std::vector<int> closed;
  auto active = limiter.Admit();
  active->Idle([&] { closed.push_back(-1); });  // accepted, silent for now
  active->Busy();                               // its first request head
  EXPECT_TRUE(active->served());
  active->Idle([&] { closed.push_back(0); });  // answered; waits for its next request
  std::vector<std::unique_ptr<ConnectionLimiter::Slot>> flood;
  for (int i = 1; i <= 100; ++i) {
    auto s = limiter.Admit();
    ASSERT_NE(s, nullptr) << i;
    EXPECT_FALSE(s->served());
    s->Idle([&closed, i] { closed.push_back(i); });
    flood.push_back(std::move(s));
  }
  // 100 silent ones arrived at a limit of 3: each newcomer closed the oldest silent one, never
  // the connection that served.
  EXPECT_EQ(std::count(closed.begin(), closed.end(), 0), 0);
  EXPECT_EQ(closed.size(), 98u);
  EXPECT_EQ(closed.front(), 1);
  EXPECT_TRUE(limiter.UnderPressure());
  // With no silent one left idle, the served one is the candidate again.
  for (auto& s : flood) s->Busy();
  ASSERT_NE(limiter.Admit(), nullptr);
  EXPECT_EQ(closed.back(), 0);
}

TEST(ConnectionLimiterTest, ReleasingAnIdleSlotTakesItOffTheIdleList) {
  ConnectionLimiter limiter("test_release", 1);
  bool closed = false;
  auto a = limiter.Admit();
  a->Idle([&] { closed = true; });
  a.reset();
  auto b = limiter.Admit();
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(closed);
}

TEST(ConnectionLimitsTest, DefaultsLeaveAReserveOfDescriptors) {
  DefaultConnectionLimits d = ConnectionLimitsFromRlimit();
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  EXPECT_GT(d.open_files, 0);
  EXPECT_GE(d.http, 16);
  EXPECT_EQ(d.http, d.grpc);
  if (d.open_files > 1024) {
    EXPECT_LT(d.http + d.grpc + d.metrics, d.open_files);
  }
}

// The accept loop on a real socket: at the limit with nothing idle, the new connection is
// closed at once by the server (the client reads EOF), and the admitted ones stay open.
TEST(AcceptLoopTest, RefusedConnectionsAreClosedAtOnce) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc);
  ASSERT_OK(Listen(&acceptor, "127.0.0.1", 0, "test"));
  const int port = acceptor.local_endpoint().port();
  ConnectionLimiter limiter("test_loop", 2);
  std::vector<std::pair<tcp::socket, std::unique_ptr<ConnectionLimiter::Slot>>> held;
  std::atomic<int> admitted{0};
  AcceptLoop loop({&ioc}, acceptor, limiter, /*strand=*/false,
                  [&](tcp::socket s, std::unique_ptr<ConnectionLimiter::Slot> slot) {
                    held.emplace_back(std::move(s), std::move(slot));  // busy: never idle
                    ++admitted;
                  });
  loop.Start();
  std::thread io([&] { ioc.run(); });
  net::io_context client_ioc;
  std::vector<tcp::socket> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back(client_ioc);
    clients.back().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }
  char byte;
  boost::system::error_code ec;
  clients[2].read_some(net::buffer(&byte, 1), ec);  // blocks until the server closes it
  EXPECT_EQ(ec, net::error::eof);
  EXPECT_EQ(admitted.load(), 2);
  net::post(ioc, [&] {
    acceptor.close();
    held.clear();
  });
  io.join();
  EXPECT_EQ(limiter.open(), 0);
}

}  // namespace
}  // namespace dais::frontends
