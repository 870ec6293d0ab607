// Real redis-server processes for tests: a standalone server on a free loopback port, and a
// Redis Cluster of N masters. No mocks (docs/STYLE: "never a mock of a server we can run").
//
// Each server runs in its own temporary directory with `--save '' --appendonly no`, logs to
// <dir>/redis.log, and is SIGKILLed and its directory removed by the destructor. The child is
// also killed if the thread that started it exits (PR_SET_PDEATHSIG): start servers from the
// test's main thread (or a thread that outlives them).
//
// Thread-safety: none; drive a RedisProcess / RedisCluster from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dais/status.h"
#include "redis/options.h"
#include "redis/resp.h"

namespace dais::redis::testing {

// Polls `cond` every 5 ms until it holds or `timeout` passes (for state that has no
// notification, e.g. a client becoming unreachable). Returns whether it held.
inline bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Client options for tests: `seeds` with short timeouts, health checks and reconnect backoff, so
// that failures and recoveries show within a test's patience (connect 300 ms, commands 1 s,
// health check 100 ms, backoff 20-200 ms, stuck connection 500 ms).
ClientOptions FastClientOptions(const std::string& seeds);

// A loopback TCP port that was free when checked (bind port 0, read it, close).
StatusOr<int> PickFreePort();

// One command over a fresh blocking TCP connection, independent of redis::Client (for fixtures
// and for checking the server side in tests). AUTH first when `password` is set.
StatusOr<Reply> BlockingCall(const std::string& address, const Command& command,
                             std::chrono::milliseconds timeout = std::chrono::seconds(2),
                             const std::string& password = "");

struct RedisProcessOptions {
  std::string password;                 // --requirepass; used by Call()
  bool cluster_enabled = false;         // --cluster-enabled yes, own nodes.conf and bus port
  std::vector<std::string> extra_args;  // appended, e.g. {"--maxmemory", "10mb"}
  std::chrono::milliseconds start_timeout{5000};
};

class RedisProcess {
 public:
  // Starts redis-server (found on PATH) on a free port and waits until it answers PING. Retries
  // with another port if the chosen one was taken meanwhile. Internal on failure, with the tail
  // of the server's log.
  static StatusOr<std::unique_ptr<RedisProcess>> Start(RedisProcessOptions options = {});
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL and reap: clients see their connections reset, new connects are refused.
  Status Stop();
  // SIGSTOP / SIGCONT: the kernel still accepts connections, nothing is answered.
  Status Pause();
  Status Resume();
  // Stop (if running) and start again on the same port and directory (an empty dataset unless
  // cluster-enabled, where nodes.conf keeps the node's identity and slots).
  Status Restart();

  // BlockingCall on this server, with its password.
  StatusOr<Reply> Call(const Command& command,
                       std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;
  // The last `bytes` of <dir>/redis.log.
  std::string LogTail(size_t bytes = 2000) const;

 private:
  RedisProcess(RedisProcessOptions options, std::string dir);
  Status Spawn();  // starts on port_ (and bus_port_), waits for PING

  RedisProcessOptions options_;
  std::string dir_;
  int port_ = 0;
  int bus_port_ = 0;
  pid_t pid_ = -1;
};

// N masters (no replicas) joined with `redis-cli --cluster create`, all slots assigned, and every
// node reporting cluster_state:ok.
class RedisCluster {
 public:
  static StatusOr<std::unique_ptr<RedisCluster>> Start(int masters = 3,
                                                       RedisProcessOptions options = {});

  size_t size() const { return nodes_.size(); }
  RedisProcess& node(size_t i) { return *nodes_[i]; }
  // "127.0.0.1:p1,127.0.0.1:p2,..." (for ParseSeeds).
  std::string seeds() const;
  std::vector<std::string> addresses() const;
  // CLUSTER MYID of node i.
  StatusOr<std::string> NodeId(size_t i) const;
  // The index of the node that serves `slot`, as node 0 sees it.
  StatusOr<size_t> SlotOwner(uint16_t slot) const;
  // Waits until every node reports cluster_state:ok and knows every other node.
  Status WaitHealthy(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

 private:
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace dais::redis::testing
