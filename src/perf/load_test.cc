#include "perf/load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status_testing.h"

namespace dais::perf {
namespace {

// Answers after `delay`, failing every `fail_every`-th request (0: never); or, when `hang`,
// blocks until aborted.
class FakeSession : public InferSession {
 public:
  FakeSession(std::chrono::microseconds delay, int fail_every, bool hang)
      : delay_(delay), fail_every_(fail_every), hang_(hang) {}

  // (No analysis: CondVar's DAIS_REQUIRES names its own pointer to mu_.)
  Status Infer() override DAIS_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock lock(&mu_);
    if (aborted_) return Cancelled("aborted");
    if (hang_) {
      while (!aborted_) cv_.Wait();
      return Cancelled("aborted");
    }
    cv_.WaitUntil(std::chrono::steady_clock::now() + delay_);
    if (fail_every_ > 0 && ++count_ % fail_every_ == 0) return Unavailable("fake failure");
    return OkStatus();
  }

  void Abort() override {
    MutexLock lock(&mu_);
    aborted_ = true;
    cv_.SignalAll();
  }

 private:
  const std::chrono::microseconds delay_;
  const int fail_every_;
  const bool hang_;
  Mutex mu_;
  CondVar cv_{&mu_};
  bool aborted_ DAIS_GUARDED_BY(mu_) = false;
  int count_ DAIS_GUARDED_BY(mu_) = 0;
};

LoadOptions FastOptions() {
  LoadOptions o;
  o.warmup_secs = 0.02;
  o.measurement_interval_ms = 50;
  o.stability_percentage = 1000;  // any three windows agree: stop after 3
  o.max_trials = 5;
  o.stop_grace_ms = 200;
  return o;
}

struct Counters {
  std::atomic<int> sessions{0};
  std::atomic<uint64_t> snapshots{0};
};

SessionFactory Factory(Counters* c, int fail_every = 0, bool hang = false) {
  return [c, fail_every, hang](int) -> StatusOr<std::unique_ptr<InferSession>> {
    c->sessions.fetch_add(1);
    return std::unique_ptr<InferSession>(
        std::make_unique<FakeSession>(std::chrono::microseconds(500), fail_every, hang));
  };
}

// Each snapshot: 10 more inferences in 5 executions, 10 us of queue per request.
StatsSource Stats(Counters* c) {
  return [c]() -> std::optional<ServerStats> {
    uint64_t n = c->snapshots.fetch_add(1) + 1;
    ServerStats s;
    s.inference_count = 10 * n;
    s.execution_count = 5 * n;
    s.queue = {10 * n, 100'000 * n};
    return s;
  };
}

TEST(LoadRunner, ConcurrencyLevelsReuseSessions) {
  Counters c;
  LoadRunner runner(FastOptions(), Factory(&c), Stats(&c));
  auto m = runner.Run(Level{2, 0});
  ASSERT_OK(m);
  EXPECT_EQ(c.sessions.load(), 2);
  EXPECT_TRUE(m->stable);
  EXPECT_EQ(m->windows, 3);
  EXPECT_GT(m->successes, 0);
  EXPECT_EQ(m->errors, 0);
  EXPECT_EQ(static_cast<int64_t>(m->latencies_ns.size()), m->successes);
  EXPECT_NEAR(m->seconds, 0.15, 1e-9);
  ASSERT_TRUE(m->server.has_value());
  EXPECT_DOUBLE_EQ(m->server->avg_batch, 2.0);
  EXPECT_DOUBLE_EQ(m->server->queue_us, 10.0);
  EXPECT_EQ(m->server->inferences, 30u);  // over the 3 windows reported

  auto m4 = runner.Run(Level{4, 0});
  ASSERT_OK(m4);
  EXPECT_EQ(c.sessions.load(), 4);  // two more, the first two reused
  EXPECT_OK(runner.first_error());
}

TEST(LoadRunner, ErrorsAreCountedAndTheFirstKept) {
  Counters c;
  LoadRunner runner(FastOptions(), Factory(&c, /*fail_every=*/2), []() { return std::nullopt; });
  auto m = runner.Run(Level{1, 0});
  ASSERT_OK(m);
  EXPECT_GT(m->errors, 0);
  EXPECT_GT(m->successes, 0);
  EXPECT_FALSE(m->server.has_value());
  EXPECT_EQ(runner.first_error().message(), "fake failure");
}

TEST(LoadRunner, UnstableAfterMaxTrials) {
  Counters c;
  LoadOptions o = FastOptions();
  o.stability_percentage = 1e-9;  // never stable unless the windows match exactly
  o.max_trials = 4;
  LoadRunner runner(o, Factory(&c), Stats(&c));
  auto m = runner.Run(Level{1, 0});
  ASSERT_OK(m);
  if (!m->stable) {
    EXPECT_EQ(m->windows, 4);
  }
  EXPECT_EQ(m->window_throughputs.size(), static_cast<size_t>(m->windows));
}

TEST(LoadRunner, RequestRateSendsOnSchedule) {
  Counters c;
  LoadOptions o = FastOptions();
  o.measurement_interval_ms = 200;
  o.max_threads = 4;
  LoadRunner runner(o, Factory(&c), Stats(&c));
  auto m = runner.Run(Level{0, 200});
  ASSERT_OK(m);
  EXPECT_EQ(c.sessions.load(), 4);
  // 200/s over 3 x 0.2 s: about 120 requests; loose bounds for a loaded machine.
  EXPECT_GT(m->successes, 60);
  EXPECT_LT(m->successes, 160);
}

TEST(LoadRunner, HungRequestsAreAbortedAndSessionsReplaced) {
  Counters c;
  LoadRunner runner(FastOptions(), Factory(&c, 0, /*hang=*/true), Stats(&c));
  auto start = std::chrono::steady_clock::now();
  auto m = runner.Run(Level{2, 0});
  ASSERT_OK(m);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(m->successes, 0);
  ASSERT_OK(runner.Run(Level{2, 0}));
  EXPECT_EQ(c.sessions.load(), 4);  // the aborted ones were made anew
}

// Keeps `slots` requests in flight by completing them all every 500 us; remembers the slot
// counts it was given.
class FakeMultiSession : public InferSession {
 public:
  explicit FakeMultiSession(std::vector<int>* slots_seen, Mutex* mu)
      : slots_seen_(slots_seen), mu_(mu) {}
  Status Infer() override { return Unimplemented("RunSlots only"); }
  int MaxInFlight() const override { return 1000; }
  Status RunSlots(int slots, const std::function<bool()>& stop, const RequestDone& done) override {
    {
      MutexLock lock(mu_);
      slots_seen_->push_back(slots);
    }
    while (!stop()) {
      const int64_t start = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      for (int i = 0; i < slots; ++i) done(start, start + 500'000, OkStatus());
    }
    return OkStatus();
  }
  void Abort() override {}

 private:
  std::vector<int>* slots_seen_;
  Mutex* mu_;
};

TEST(LoadRunner, FewerConnectionsThanRequestsSpreadsSlots) {
  Mutex mu;
  std::vector<int> seen;
  Counters c;
  LoadOptions o = FastOptions();
  o.connections = 2;
  LoadRunner runner(
      o,
      [&](int) -> StatusOr<std::unique_ptr<InferSession>> {
        c.sessions.fetch_add(1);
        return std::unique_ptr<InferSession>(std::make_unique<FakeMultiSession>(&seen, &mu));
      },
      Stats(&c));
  auto m = runner.Run(Level{5, 0});
  ASSERT_OK(m);
  EXPECT_EQ(c.sessions.load(), 2);
  EXPECT_GT(m->successes, 0);
  EXPECT_EQ(m->errors, 0);
  MutexLock lock(&mu);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{2, 3}));  // 5 in flight over 2 connections
}

TEST(LoadRunner, FewerConnectionsNeedsAMultiplexingProtocol) {
  Counters c;
  LoadOptions o = FastOptions();
  o.connections = 1;
  LoadRunner runner(o, Factory(&c), Stats(&c));
  auto m = runner.Run(Level{2, 0});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  // Concurrency 1 with one connection is the plain case.
  EXPECT_OK(runner.Run(Level{1, 0}));
}

}  // namespace
}  // namespace dais::perf
