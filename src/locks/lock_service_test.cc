// The lock service against real Redis: the core suite on a standalone server and on a 3-master
// Redis Cluster (both started once for the suite), then multi-process, pause, kill and restart
// tests on standalone servers. Short leases (300 ms) keep the whole file fast.
#include "locks/lock_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "common/status_testing.h"
#include "locks/fenced_table.h"
#include "locks/lock_metrics.h"
#include "locks/lock_scripts.h"
#include "redis/testing/redis_process.h"

namespace dais::locks {
namespace {

using redis::testing::RedisCluster;
using redis::testing::RedisProcess;
using redis::testing::WaitFor;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kShortLease{300};

std::unique_ptr<redis::Client> MakeClient(const std::string& seeds) {
  auto client = redis::Client::Create(redis::testing::FastClientOptions(seeds));
  EXPECT_OK(client);
  if (!client.ok()) return nullptr;
  EXPECT_TRUE((*client)->WaitUntilReachable(milliseconds(5000)));
  return std::move(*client);
}

std::unique_ptr<LockService> MakeService(redis::Client* client, const std::string& node,
                                         milliseconds lease = kShortLease,
                                         std::function<void(LockServiceOptions*)> tweak = {}) {
  LockServiceOptions o;
  o.node_id = node;
  o.lease = lease;
  if (tweak) tweak(&o);
  auto s = LockService::Create(client, o);
  EXPECT_OK(s);
  return s.ok() ? std::move(*s) : nullptr;
}

// A fresh model name per use, so tests sharing a server never collide.
std::string FreshModel(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

// ---------------------------------------------------------------------------------------------
// The core suite, on standalone and on Cluster.

enum class Mode { kStandalone, kCluster };

class LockTest : public ::testing::TestWithParam<Mode> {
 protected:
  static void SetUpTestSuite() {
    auto server = RedisProcess::Start();
    ASSERT_OK(server);
    standalone_ = server->release();
    auto cluster = RedisCluster::Start(3);
    ASSERT_OK(cluster);
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete standalone_;
    delete cluster_;
    standalone_ = nullptr;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(standalone_, nullptr);
    ASSERT_NE(cluster_, nullptr);
    client_ = MakeClient(seeds());
    ASSERT_NE(client_, nullptr);
    ASSERT_EQ(client_->cluster_mode(), GetParam() == Mode::kCluster);
    locks_ = MakeService(client_.get(), "node-a");
    ASSERT_NE(locks_, nullptr);
    model_ = FreshModel("m");
  }
  void TearDown() override {
    locks_.reset();
    client_.reset();
  }
  std::string seeds() const {
    return GetParam() == Mode::kCluster ? cluster_->seeds() : standalone_->address();
  }

  static RedisProcess* standalone_;
  static RedisCluster* cluster_;
  std::unique_ptr<redis::Client> client_;
  std::unique_ptr<LockService> locks_;
  std::string model_;
};

RedisProcess* LockTest::standalone_ = nullptr;
RedisCluster* LockTest::cluster_ = nullptr;

TEST_P(LockTest, TryAcquireExcludesAndReleaseFrees) {
  auto a = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(a);
  EXPECT_TRUE((*a)->owner().starts_with("node-a/"));
  EXPECT_FALSE((*a)->Lost());
  auto b = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kAborted);
  EXPECT_NE(b.status().message().find((*a)->owner()), std::string::npos);
  const int64_t first = (*a)->token();
  EXPECT_OK((*a)->Release());
  EXPECT_TRUE((*a)->Lost());  // released
  EXPECT_EQ((*a)->Release().code(), StatusCode::kFailedPrecondition);
  auto c = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(c);
  EXPECT_GT((*c)->token(), first);
  EXPECT_NE((*c)->owner(), (*a)->owner());
}

TEST_P(LockTest, DestroyingTheLeaseReleasesIt) {
  {
    auto a = locks_->TryAcquire(LockResource::Node(model_, "n1"));
    ASSERT_OK(a);
  }
  EXPECT_OK(locks_->TryAcquire(LockResource::Node(model_, "n1")));
}

TEST_P(LockTest, ReleaseIsByOwnerOnly) {
  auto a = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(a);
  const internal::LockKeys k = internal::KeysFor(LockResource::Model(model_));
  // Someone else's compare-and-delete does nothing.
  auto r = client_->RunEval(internal::ReleaseScript(), {k.lock, k.intents, k.waiters},
                            {"node-b/0000000000000000", "", k.wake, ""});
  ASSERT_OK(r);
  EXPECT_EQ(*r, redis::Reply::Integer(0));
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(), StatusCode::kAborted);
  // A holder whose lock was broken and taken over cannot release the new holder's lock.
  ASSERT_OK(Break(client_.get(), LockResource::Model(model_)));
  auto b = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(b);
  EXPECT_EQ((*a)->Release().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*b)->Lost());
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(), StatusCode::kAborted);
  EXPECT_OK((*b)->Release());
}

TEST_P(LockTest, NotReentrant) {
  // Documented rule: every acquire is a new contender with a new owner, also in the same
  // process and thread; a second acquire of a held lock is refused / waits.
  auto a = locks_->TryAcquire(LockResource::Version(model_, "1"));
  ASSERT_OK(a);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Version(model_, "1")).status().code(),
            StatusCode::kAborted);
  const auto start = Clock::now();
  auto again = locks_->Acquire(LockResource::Version(model_, "1"), milliseconds(150));
  EXPECT_EQ(again.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(Clock::now() - start, milliseconds(150));
  EXPECT_FALSE((*a)->Lost());
}

TEST_P(LockTest, ManyThreadsMutualExclusion) {
  constexpr int kThreads = 8, kIterations = 25;
  std::atomic<bool> inside{false};
  std::atomic<int> violations{0}, failures{0};
  int counter = 0;  // protected by the lock only
  std::atomic<int64_t> last_token{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        auto lease = locks_->Acquire(LockResource::Model(model_), milliseconds(20000));
        if (!lease.ok()) {
          ++failures;
          continue;
        }
        if (inside.exchange(true)) ++violations;
        if ((*lease)->token() <= last_token.load()) ++violations;
        last_token = (*lease)->token();
        const int v = counter;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        counter = v + 1;
        inside = false;
        if (!(*lease)->Release().ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(counter, kThreads * kIterations);
}

TEST_P(LockTest, RenewalKeepsAHolderAliveWellPastTheLease) {
  auto& renewals = internal::LockMetrics::For(LockLevel::kModel).renewals;
  const double before = renewals.Value();
  std::atomic<int> lost_calls{0};
  AcquireOptions ao;
  ao.on_lost = [&](const Status&) { ++lost_calls; };
  auto a = locks_->TryAcquire(LockResource::Model(model_), ao);
  ASSERT_OK(a);
  const auto initial_deadline = (*a)->deadline();
  for (int i = 0; i < 15; ++i) {  // 1.5 s = 5 leases
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_OK((*a)->Check());
  }
  EXPECT_GT((*a)->deadline(), initial_deadline);
  EXPECT_GE(renewals.Value() - before, 10);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(), StatusCode::kAborted);
  EXPECT_OK((*a)->Release());
  EXPECT_EQ(lost_calls.load(), 0);
}

TEST_P(LockTest, ExpiryFreesAStalledHolderAndFencingRejectsIt) {
  auto& m = internal::LockMetrics::For(LockLevel::kModel);
  const double expirations = m.expirations.Value(), lost = m.lost.Value();
  std::atomic<int> lost_calls{0};
  AcquireOptions ao;
  ao.on_lost = [&](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
    ++lost_calls;
  };
  auto stale = locks_->TryAcquire(LockResource::Model(model_), ao);
  ASSERT_OK(stale);
  FencedTable table;  // the protected resource: e.g. a node's active-version table
  ASSERT_OK(table.Check(model_, (*stale)->token()));
  (*stale)->SuspendRenewalForTesting(true);  // the holder "pauses"

  auto other_client = MakeClient(seeds());
  auto other = MakeService(other_client.get(), "node-b");
  const auto start = Clock::now();
  auto fresh = other->Acquire(LockResource::Model(model_), milliseconds(3000));
  ASSERT_OK(fresh);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_GT((*fresh)->token(), (*stale)->token());
  ASSERT_OK(table.Check(model_, (*fresh)->token()));

  // The stale holder's deadline (grant + lease - margin) came before the Redis expiry.
  EXPECT_TRUE((*stale)->Lost());
  EXPECT_TRUE(WaitFor([&] { return lost_calls.load() == 1; }, milliseconds(1000)));
  (*stale)->SuspendRenewalForTesting(false);
  // Its late operation carries the old token: rejected.
  bool applied = false;
  EXPECT_EQ(table.Apply(model_, (*stale)->token(), [&] { applied = true; }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(applied);
  EXPECT_EQ((*stale)->Release().code(), StatusCode::kFailedPrecondition);  // not its lock
  EXPECT_FALSE((*fresh)->Lost());
  EXPECT_GE(m.expirations.Value(), expirations + 1);
  EXPECT_GE(m.lost.Value(), lost + 1);
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(lost_calls.load(), 1);  // once
}

TEST_P(LockTest, HierarchyModelExcludesVersionAndNodeAndViceVersa) {
  auto model_lock = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(model_lock);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Version(model_, "1")).status().code(),
            StatusCode::kAborted);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Node(model_, "n1")).status().code(),
            StatusCode::kAborted);
  // Another model is independent.
  const std::string other = FreshModel("other");
  auto other_version = locks_->TryAcquire(LockResource::Version(other, "1"));
  EXPECT_OK(other_version);
  const int64_t t0 = (*model_lock)->token();
  ASSERT_OK((*model_lock)->Release());

  // VERSION and NODE locks of one model coexist; each takes an intention on the model.
  auto v1 = locks_->TryAcquire(LockResource::Version(model_, "1"));
  auto v2 = locks_->TryAcquire(LockResource::Version(model_, "2", "n1"));
  auto v2b = locks_->TryAcquire(LockResource::Version(model_, "2", "n2"));
  auto n1 = locks_->TryAcquire(LockResource::Node(model_, "n1"));
  ASSERT_TRUE(v1.ok() && v2.ok() && v2b.ok() && n1.ok());
  EXPECT_EQ(locks_->TryAcquire(LockResource::Version(model_, "2", "n1")).status().code(),
            StatusCode::kAborted);
  // Tokens of all levels of one model are totally ordered.
  EXPECT_GT((*v1)->token(), t0);
  EXPECT_GT((*v2)->token(), (*v1)->token());
  EXPECT_GT((*v2b)->token(), (*v2)->token());
  EXPECT_GT((*n1)->token(), (*v2b)->token());
  auto refused = locks_->TryAcquire(LockResource::Model(model_));
  EXPECT_EQ(refused.status().code(), StatusCode::kAborted);
  EXPECT_NE(refused.status().message().find("intentions"), std::string::npos);
  ASSERT_OK((*v1)->Release());
  ASSERT_OK((*v2)->Release());
  ASSERT_OK((*v2b)->Release());
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(),
            StatusCode::kAborted);  // n1 still holds an intention
  ASSERT_OK((*n1)->Release());
  auto again = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(again);
  EXPECT_GT((*again)->token(), (*n1)->token());
}

TEST_P(LockTest, ExpiredIntentionsDoNotBlockTheModelLock) {
  auto n1 = locks_->TryAcquire(LockResource::Node(model_, "n1"));
  ASSERT_OK(n1);
  (*n1)->SuspendRenewalForTesting(true);  // its holder dies
  auto model_lock = locks_->Acquire(LockResource::Model(model_), milliseconds(3000));
  ASSERT_OK(model_lock);
  EXPECT_TRUE((*n1)->Lost());
}

TEST_P(LockTest, BlockingAcquireWakesOnRelease) {
  // Polling would be slow here (max_backoff 2 s, and the holder's lease is long): a fast grant
  // after the release shows the wake-up.
  auto waiter_service =
      MakeService(client_.get(), "node-w", milliseconds(10000),
                  [](LockServiceOptions* o) { o->max_backoff = milliseconds(2000); });
  auto holder = locks_->TryAcquire(LockResource::Model(model_),
                                   {.lease = milliseconds(10000), .on_lost = {}});
  ASSERT_OK(holder);
  std::atomic<int64_t> granted_after_release_ms{-1};
  std::atomic<Clock::rep> released_at{0};
  std::thread waiter([&] {
    auto lease = waiter_service->Acquire(LockResource::Model(model_), milliseconds(5000));
    EXPECT_OK(lease);
    const auto now = Clock::now().time_since_epoch().count();
    granted_after_release_ms = (now - released_at.load()) / 1000000;
  });
  std::this_thread::sleep_for(milliseconds(300));
  released_at = Clock::now().time_since_epoch().count();
  ASSERT_OK((*holder)->Release());
  waiter.join();
  EXPECT_GE(granted_after_release_ms.load(), 0);
  EXPECT_LT(granted_after_release_ms.load(), 150);
}

TEST_P(LockTest, ModelWaiterWakesWhenIntentionsDrain) {
  auto node_lock = locks_->TryAcquire(LockResource::Node(model_, "n1"),
                                      {.lease = milliseconds(10000), .on_lost = {}});
  ASSERT_OK(node_lock);
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    auto lease = locks_->Acquire(LockResource::Model(model_), milliseconds(5000));
    EXPECT_OK(lease);
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(done.load());
  const auto released = Clock::now();
  ASSERT_OK((*node_lock)->Release());
  waiter.join();
  EXPECT_LT(Clock::now() - released, milliseconds(200));
}

TEST_P(LockTest, ListInspectBreak) {
  std::atomic<int> lost_calls{0};
  AcquireOptions ao;
  ao.on_lost = [&](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    ++lost_calls;
  };
  auto v = locks_->TryAcquire(LockResource::Version(model_, "7", "n1"));
  auto n = locks_->TryAcquire(LockResource::Node(model_, "n1"), ao);
  ASSERT_TRUE(v.ok() && n.ok());

  auto state = Inspect(client_.get(), model_);
  ASSERT_OK(state);
  EXPECT_FALSE(state->model_lock.has_value());
  ASSERT_EQ(state->sub_locks.size(), 2u);
  EXPECT_EQ(state->fence, (*n)->token());
  EXPECT_TRUE(state->stale_intentions.empty());
  for (const LockInfo& l : state->sub_locks) {
    if (l.name == "node:n1") {
      EXPECT_EQ(l.owner, (*n)->owner());
      EXPECT_EQ(l.token, (*n)->token());
      EXPECT_EQ(l.level, LockLevel::kNode);
    } else {
      EXPECT_EQ(l.name, "version:7@n1");
      EXPECT_EQ(l.level, LockLevel::kVersion);
      EXPECT_EQ(l.owner, (*v)->owner());
    }
    EXPECT_GT(l.ttl.count(), 0);
    EXPECT_LE(l.ttl, kShortLease);
  }

  auto listed = List(client_.get(), model_);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "node:n1");
  EXPECT_EQ((*listed)[1].name, "version:7@n1");
  auto all = List(client_.get(), "*");
  ASSERT_OK(all);
  EXPECT_GE(all->size(), 2u);

  auto removed = Break(client_.get(), LockResource::Node(model_, "n1"));
  ASSERT_OK(removed);
  ASSERT_EQ(removed->size(), 1u);
  EXPECT_EQ((*removed)[0].owner, (*n)->owner());
  // The broken holder learns it at its next renewal (refused), once.
  EXPECT_TRUE(WaitFor([&] { return lost_calls.load() == 1; }, milliseconds(1000)));
  EXPECT_TRUE((*n)->Lost());
  EXPECT_FALSE((*v)->Lost());
  EXPECT_TRUE(Break(client_.get(), LockResource::Node(model_, "n1"))->empty());

  auto everything = BreakModel(client_.get(), model_);
  ASSERT_OK(everything);
  EXPECT_EQ(everything->size(), 1u);
  state = Inspect(client_.get(), model_);
  ASSERT_OK(state);
  EXPECT_TRUE(state->sub_locks.empty());
  EXPECT_EQ(state->fence, (*n)->token());  // the fence survives a break
  auto after = locks_->TryAcquire(LockResource::Model(model_));
  ASSERT_OK(after);
  EXPECT_GT((*after)->token(), (*n)->token());
}

TEST_P(LockTest, WaitForReplicasWithoutReplicasIsUnavailableAndLeavesNoLock) {
  auto durable = MakeService(client_.get(), "node-d", kShortLease, [](LockServiceOptions* o) {
    o->wait_replicas = 1;
    o->wait_timeout = milliseconds(50);
  });
  auto lease = durable->TryAcquire(LockResource::Node(model_, "n1"));
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), StatusCode::kUnavailable) << lease.status().ToString();
  auto state = Inspect(client_.get(), model_);
  ASSERT_OK(state);
  EXPECT_TRUE(state->sub_locks.empty());
  EXPECT_TRUE(state->stale_intentions.empty());
  EXPECT_OK(locks_->TryAcquire(LockResource::Model(model_)));  // no intention left
  // With 0 replicas required the same service grants.
  auto plain = MakeService(client_.get(), "node-d", kShortLease,
                           [](LockServiceOptions* o) { o->wait_replicas = 0; });
  EXPECT_OK(plain->TryAcquire(LockResource::Node(model_, "n2")));
}

TEST_P(LockTest, InvalidArguments) {
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model("a{b")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Version(model_, "")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LockService::Create(client_.get(), {}).status().code(), StatusCode::kInvalidArgument);
  LockServiceOptions bad;
  bad.node_id = "n";
  bad.lease = milliseconds(300);
  bad.renew_interval = milliseconds(300);
  EXPECT_EQ(LockService::Create(client_.get(), bad).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Redis, LockTest, ::testing::Values(Mode::kStandalone, Mode::kCluster),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return info.param == Mode::kCluster ? "Cluster" : "Standalone";
                         });

// ---------------------------------------------------------------------------------------------
// Several processes (locks_lock_helper, next to this test binary).

std::string HelperPath() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "locks_lock_helper")
      .string();
}

// A helper process with a pipe to its stdin and one from its stdout.
class Helper {
 public:
  static std::unique_ptr<Helper> Spawn(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return nullptr;
    const std::string path = HelperPath();
    std::vector<char*> argv = {const_cast<char*>(path.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::execv(path.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    auto h = std::unique_ptr<Helper>(new Helper);
    h->pid_ = pid;
    h->in_ = in[1];
    h->out_ = out[0];
    return h;
  }
  ~Helper() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(in_);
    ::close(out_);
  }
  pid_t pid() const { return pid_; }
  void Send(const std::string& line) {
    const std::string l = line + "\n";
    EXPECT_EQ(::write(in_, l.data(), l.size()), static_cast<ssize_t>(l.size()));
  }
  // One line of output, "" on timeout or EOF.
  std::string ReadLine(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return "";
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char b[256];
      const ssize_t n = ::read(out_, b, sizeof(b));
      if (n <= 0) return "";
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Exit status, or -1.
  int Wait() {
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  Status Kill(int sig) { return ::kill(pid_, sig) == 0 ? OkStatus() : Internal("kill failed"); }

 private:
  Helper() = default;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
};

int64_t TokenOf(const std::string& line) {
  return line.starts_with("token ") ? std::stoll(line.substr(6)) : -1;
}

class LockProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisProcess::Start();
    ASSERT_OK(server);
    server_ = std::move(*server);
    client_ = MakeClient(server_->address());
    ASSERT_NE(client_, nullptr);
    locks_ = MakeService(client_.get(), "parent");
    model_ = FreshModel("p");
  }
  std::unique_ptr<RedisProcess> server_;
  std::unique_ptr<redis::Client> client_;
  std::unique_ptr<LockService> locks_;
  std::string model_;
};

TEST_F(LockProcessTest, SeveralProcessesMutualExclusion) {
  constexpr int kProcesses = 4, kIterations = 25;
  std::vector<std::unique_ptr<Helper>> helpers;
  for (int i = 0; i < kProcesses; ++i) {
    helpers.push_back(
        Helper::Spawn({"counter", server_->address(), model_, std::to_string(kIterations), "300",
                       "proc-" + std::to_string(i)}));
    ASSERT_NE(helpers.back(), nullptr);
  }
  for (auto& h : helpers) EXPECT_EQ(h->Wait(), 0);
  auto counter = client_->Run({"", {"GET", "test:{" + model_ + "}:counter"}});
  ASSERT_OK(counter);
  EXPECT_EQ(counter->str, std::to_string(kProcesses * kIterations));
}

TEST_F(LockProcessTest, KilledHolderBlocksNobodyBeyondTheLease) {
  auto holder = Helper::Spawn({"hold", server_->address(), model_, "300", "victim"});
  ASSERT_NE(holder, nullptr);
  const int64_t token = TokenOf(holder->ReadLine());
  ASSERT_GT(token, 0);
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(), StatusCode::kAborted);
  ASSERT_OK(holder->Kill(SIGKILL));
  const auto start = Clock::now();
  auto lease = locks_->Acquire(LockResource::Model(model_), milliseconds(3000));
  ASSERT_OK(lease);
  EXPECT_LT(Clock::now() - start, milliseconds(600));  // within about one lease
  EXPECT_GT((*lease)->token(), token);
}

TEST_F(LockProcessTest, PausedHolderFindsItsLockLostAndItsEffectFenced) {
  FencedTable table(LockLevel::kModel);  // the protected resource, in this process
  auto holder = Helper::Spawn({"hold", server_->address(), model_, "300", "sleepy"});
  ASSERT_NE(holder, nullptr);
  const int64_t stale_token = TokenOf(holder->ReadLine());
  ASSERT_GT(stale_token, 0);
  ASSERT_OK(table.Check(model_, stale_token));  // its first effect went through

  ASSERT_OK(holder->Kill(SIGSTOP));  // paused past its lease
  auto lease = locks_->Acquire(LockResource::Model(model_), milliseconds(3000));
  ASSERT_OK(lease);
  EXPECT_GT((*lease)->token(), stale_token);
  ASSERT_OK(table.Check(model_, (*lease)->token()));
  ASSERT_OK(holder->Kill(SIGCONT));

  // The resumed holder still carries its old token: its operation is rejected...
  EXPECT_EQ(table.Check(model_, stale_token).code(), StatusCode::kFailedPrecondition);
  // ...and it finds its lease lost, and cannot release the new holder's lock.
  holder->Send("check");
  EXPECT_EQ(holder->ReadLine(), "lost 1");
  holder->Send("release");
  EXPECT_TRUE(holder->ReadLine().starts_with("released FAILED_PRECONDITION"));
  EXPECT_FALSE((*lease)->Lost());
  EXPECT_EQ(locks_->TryAcquire(LockResource::Model(model_)).status().code(), StatusCode::kAborted);
}

TEST_F(LockProcessTest, RedisRestartWithoutPersistenceWhileHeld) {
  std::atomic<int> lost_calls{0};
  AcquireOptions ao;
  ao.on_lost = [&](const Status&) { ++lost_calls; };
  auto old_lease = locks_->TryAcquire(LockResource::Model(model_), ao);
  ASSERT_OK(old_lease);
  FencedTable table;
  int active = 0;  // who applied last: 1 old holder, 2 new holder
  ASSERT_OK(table.Apply(model_, (*old_lease)->token(), [&] { active = 1; }));

  ASSERT_OK(server_->Restart());  // empty dataset: the lock key and the fence are gone
  // The holder notices: its renewal is refused (or, while Redis is away, its deadline passes).
  EXPECT_TRUE(WaitFor([&] { return lost_calls.load() == 1; }, milliseconds(2000)));
  EXPECT_TRUE((*old_lease)->Lost());

  auto other_client = MakeClient(server_->address());
  auto other = MakeService(other_client.get(), "node-b");
  auto new_lease = other->Acquire(LockResource::Model(model_), milliseconds(3000));
  ASSERT_OK(new_lease);
  // The counter was lost with the dataset; the clock floor still makes the new token higher.
  EXPECT_GT((*new_lease)->token(), (*old_lease)->token());
  ASSERT_OK(table.Apply(model_, (*new_lease)->token(), [&] { active = 2; }));
  // The old holder, unaware or not, cannot get its effect through any more.
  EXPECT_FALSE(table.Apply(model_, (*old_lease)->token(), [&] { active = 1; }).ok());
  EXPECT_EQ(active, 2);
}

}  // namespace
}  // namespace dais::locks
