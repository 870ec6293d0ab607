// The etcd client against a real etcd (Debian's etcd-server), started here on free loopback
// ports and killed by PID.
#include "etcd/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "common/status_testing.h"
#include "etcd/watch.h"

namespace dais::etcd {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One etcd member in a temporary folder.
class EtcdProcess {
 public:
  EtcdProcess()
      : dir_(fs::temp_directory_path() / ("dais-etcd-test-" + std::to_string(getpid()))),
        client_port_(FreePort()),
        peer_port_(FreePort()) {
    fs::remove_all(dir_);
    Start();
  }
  ~EtcdProcess() {
    Kill();
    fs::remove_all(dir_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

  void Start() {
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = (dir_.string() + ".log");
      freopen(log.c_str(), "a", stdout);
      freopen(log.c_str(), "a", stderr);
      execl("/usr/bin/etcd", "etcd", "--name", "t", "--data-dir", dir_.c_str(),
            "--listen-client-urls", client.c_str(), "--advertise-client-urls", client.c_str(),
            "--listen-peer-urls", peer.c_str(), "--initial-advertise-peer-urls", peer.c_str(),
            "--initial-cluster", ("t=" + peer).c_str(), "--heartbeat-interval", "50",
            "--election-timeout", "500", nullptr);
      _exit(127);
    }
    // A fresh channel per try: a connection attempted while etcd was still starting can stall
    // for seconds in the kernel's SYN retries.
    for (int i = 0; i < 100; ++i) {
      auto c = Client::Create({{endpoint()}, std::chrono::milliseconds(300)});
      if ((*c)->Get("ping").ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "etcd did not answer on " << endpoint() << " (is etcd-server installed?)";
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  fs::path dir_;
  int client_port_;
  int peer_port_;
  pid_t pid_ = -1;
};

template <typename Pred>
bool WaitFor(Pred pred, int ms = 10000) {
  for (int i = 0; i < ms / 20; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

TEST(EtcdClientTest, KeyValueAndTransactions) {
  EtcdProcess etcd;
  ASSERT_OK_AND_ASSIGN(auto c, Client::Create({{etcd.endpoint()}}));
  ASSERT_OK(c->Put("/t/a", "1").status());
  ASSERT_OK(c->Put("/t/b", "2").status());
  ASSERT_OK(c->Put("/u", "x").status());
  ASSERT_OK_AND_ASSIGN(RangeResult r, c->Get("/t/", true));
  ASSERT_EQ(r.kvs.size(), 2u);
  EXPECT_EQ(r.kvs[0].key, "/t/a");
  EXPECT_EQ(r.kvs[1].value, "2");
  EXPECT_GT(r.revision, 0);
  // Create-if-absent: the second one fails its compare.
  Compare absent{"/t/lock", Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, ""};
  ASSERT_OK_AND_ASSIGN(TxnResult t1, c->Txn({absent}, {Op{Op::Kind::kPut, "/t/lock", "me"}}));
  EXPECT_TRUE(t1.succeeded);
  ASSERT_OK_AND_ASSIGN(TxnResult t2, c->Txn({absent}, {Op{Op::Kind::kPut, "/t/lock", "you"}}));
  EXPECT_FALSE(t2.succeeded);
  ASSERT_OK_AND_ASSIGN(r, c->Get("/t/lock"));
  EXPECT_EQ(r.kvs.at(0).value, "me");
  ASSERT_OK(c->Delete("/t/", true).status());
  ASSERT_OK_AND_ASSIGN(r, c->Get("/t/", true));
  EXPECT_TRUE(r.kvs.empty());
  ASSERT_OK_AND_ASSIGN(r, c->Get("/u"));
  EXPECT_EQ(r.kvs.size(), 1u);
}

TEST(EtcdClientTest, LeasesExpireWithTheirKeys) {
  EtcdProcess etcd;
  ASSERT_OK_AND_ASSIGN(auto c, Client::Create({{etcd.endpoint()}}));
  ASSERT_OK_AND_ASSIGN(int64_t lease, c->GrantLease(2));
  ASSERT_OK(c->Put("/n/1", "up", lease).status());
  ASSERT_OK_AND_ASSIGN(int64_t ttl, c->KeepAliveOnce(lease));
  EXPECT_GT(ttl, 0);
  ASSERT_OK(c->RevokeLease(lease));
  ASSERT_OK_AND_ASSIGN(RangeResult r, c->Get("/n/1"));
  EXPECT_TRUE(r.kvs.empty());
  EXPECT_EQ(c->KeepAliveOnce(lease).status().code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(int64_t short_lease, c->GrantLease(1));
  ASSERT_OK(c->Put("/n/2", "up", short_lease).status());
  EXPECT_TRUE(WaitFor([&] { return c->Get("/n/2")->kvs.empty(); }, 5000)) << "lease expiry";
}

TEST(EtcdClientTest, UnreachableIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(auto c, Client::Create({{"127.0.0.1:1"}, std::chrono::milliseconds(300)}));
  EXPECT_EQ(c->Get("/x").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(Client::Create({{}}).ok());
  EXPECT_FALSE(Client::Create({{"nohostport"}}).ok());
}

TEST(EtcdClientTest, WatchSeesASnapshotThenChangesAndResumesAfterARestart) {
  EtcdProcess etcd;
  ASSERT_OK_AND_ASSIGN(auto c, Client::Create({{etcd.endpoint()}}));
  ASSERT_OK(c->Put("/w/a", "1").status());
  Mutex mu;
  std::map<std::string, std::string> view;
  std::vector<std::string> log;
  Watcher::Callbacks cb;
  cb.on_snapshot = [&](const RangeResult& r) {
    MutexLock l(&mu);
    view.clear();
    for (const auto& kv : r.kvs) view[kv.key] = kv.value;
    log.push_back("snapshot");
  };
  cb.on_events = [&](const std::vector<Event>& events) {
    MutexLock l(&mu);
    for (const Event& e : events) {
      if (e.type == Event::Type::kPut) {
        view[e.kv.key] = e.kv.value;
      } else {
        view.erase(e.kv.key);
      }
      log.push_back(e.kv.key);
    }
  };
  auto seen = [&](const std::string& k, const std::string& v) {
    MutexLock l(&mu);
    auto it = view.find(k);
    return v.empty() ? it == view.end() : it != view.end() && it->second == v;
  };
  Watcher w(c.get(), "/w/", cb);
  EXPECT_TRUE(WaitFor([&] { return seen("/w/a", "1"); }));
  ASSERT_OK(c->Put("/w/b", "2").status());
  ASSERT_OK(c->Delete("/w/a").status());
  ASSERT_OK(c->Put("/other", "x").status());
  EXPECT_TRUE(WaitFor([&] { return seen("/w/b", "2") && seen("/w/a", ""); }));
  etcd.Kill();
  etcd.Start();  // same data, same port
  ASSERT_OK(c->Put("/w/c", "3").status());
  EXPECT_TRUE(WaitFor([&] { return seen("/w/c", "3"); }, 15000)) << "resumed after restart";
  EXPECT_GE(w.reconnects(), 1);
  EXPECT_EQ(w.snapshots(), 1) << "resumed from its revision, no resync needed";
  MutexLock l(&mu);
  EXPECT_EQ(std::count(log.begin(), log.end(), "/w/b"), 1) << "no event delivered twice";
  EXPECT_EQ(std::count(log.begin(), log.end(), "/other"), 0);
}

TEST(EtcdClientTest, AWatchFromACompactedRevisionResyncsWithASnapshot) {
  EtcdProcess etcd;
  ASSERT_OK_AND_ASSIGN(auto c, Client::Create({{etcd.endpoint()}}));
  ASSERT_OK_AND_ASSIGN(int64_t first, c->Put("/w/a", "1"));
  ASSERT_OK(c->Put("/w/a", "2").status());
  ASSERT_OK(c->Delete("/w/a").status());
  ASSERT_OK_AND_ASSIGN(int64_t last, c->Put("/w/b", "3"));
  ASSERT_OK(c->Compact(last));
  Mutex mu;
  std::vector<RangeResult> snapshots;
  int events = 0;
  Watcher::Callbacks cb;
  cb.on_snapshot = [&](const RangeResult& r) {
    MutexLock l(&mu);
    snapshots.push_back(r);
  };
  cb.on_events = [&](const std::vector<Event>& e) {
    MutexLock l(&mu);
    events += static_cast<int>(e.size());
  };
  // As a watcher that saw revision `first` and was away while the history was compacted.
  Watcher w(c.get(), "/w/", cb, first + 1);
  EXPECT_TRUE(WaitFor([&] {
    MutexLock l(&mu);
    return !snapshots.empty();
  })) << "resynchronised";
  {
    MutexLock l(&mu);
    ASSERT_EQ(snapshots.size(), 1u);
    ASSERT_EQ(snapshots[0].kvs.size(), 1u) << "the store as it is: /w/a gone, /w/b there";
    EXPECT_EQ(snapshots[0].kvs[0].key, "/w/b");
    EXPECT_EQ(events, 0) << "no event of the lost history";
  }
  ASSERT_OK(c->Put("/w/c", "4").status());
  EXPECT_TRUE(WaitFor([&] {
    MutexLock l(&mu);
    return events == 1;
  })) << "watching again after the snapshot";
  EXPECT_EQ(w.snapshots(), 1);
}

}  // namespace
}  // namespace dais::etcd
