// The I/O-thread core of the Client: node pools, mode detection, the cluster slot map, routing,
// redirections (MOVED, ASK, TRYAGAIN), NOSCRIPT fallback, deadlines, health checks and slot
// refreshes. See docs/redis-client.md.
//
// Thread-safety: Router is used on its io_context's single thread only (Client posts to it).
// ClientState is the thread-safe part that the Router publishes for other threads.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_checker.h"
#include "redis/command.h"
#include "redis/node_pool.h"
#include "redis/options.h"
#include "redis/topology.h"

namespace dais::redis {

// What other threads may read: reachability, masters, mode. Thread-safe.
class ClientState {
 public:
  void SetReachable(bool reachable) DAIS_EXCLUDES(mu_);
  bool reachable() const DAIS_EXCLUDES(mu_);
  // True once reachable, false if `deadline` passed first. (No analysis: CondVar's REQUIRES
  // names its own pointer to mu_.)
  bool WaitReachable(Deadline deadline) const DAIS_EXCLUDES(mu_) DAIS_NO_THREAD_SAFETY_ANALYSIS;
  void SetMasters(std::vector<std::string> masters) DAIS_EXCLUDES(mu_);
  std::vector<std::string> masters() const DAIS_EXCLUDES(mu_);
  void SetClusterMode(bool cluster) DAIS_EXCLUDES(mu_);
  bool cluster_mode() const DAIS_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable CondVar cv_{&mu_};
  bool reachable_ DAIS_GUARDED_BY(mu_) = false;
  bool cluster_mode_ DAIS_GUARDED_BY(mu_) = false;
  std::vector<std::string> masters_ DAIS_GUARDED_BY(mu_);
};

// One caller request (Execute, ExecuteBatch, Eval, ExecuteOn): its results, in input order, are
// delivered once, when all are answered or at the deadline.
struct Batch;

// One command of a Batch, followed through redirections and retries.
struct Op {
  std::string key;       // routing key; "" = any master
  std::string node;      // ExecuteOn: this node only, redirections not followed
  std::string payload;   // the encoded command
  std::string fallback;  // sent instead when the reply is NOSCRIPT (Eval: EVAL), once
  Status invalid;        // not OK: answered with this status without sending
  // Filled by the router:
  std::shared_ptr<Batch> batch;
  size_t index = 0;
  Deadline deadline;
  std::string target;     // the node named by the last MOVED/ASK ("" = route by key)
  bool asking = false;    // send ASKING first (ASK redirection)
  int redirections = 0;   // MOVED, ASK and TRYAGAIN retries so far
  std::string last_node;  // where the last attempt went
};
using OpPtr = std::shared_ptr<Op>;

class Router {
 public:
  // `options` and `state` must outlive the Router.
  Router(boost::asio::io_context* io, const ClientOptions& options, ClientState* state);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Creates the seed pools and starts the timers.
  void Start();
  // Sends `ops` (all nodes in parallel; per node on one connection, in input order, one write)
  // and calls `cb` once with one result per op, in order: at the latest at `deadline`
  // (DeadlineExceeded for those unanswered).
  void Submit(std::vector<OpPtr> ops, Deadline deadline, BatchCallback cb);
  // Fails everything pending with Unavailable("redis client shutting down"), closes every
  // connection, cancels the timers. Later Submits are answered the same way.
  void Shutdown();

 private:
  void OnPoolChange();
  void HealthTick();
  void ArmHealthTimer();
  void ArmRefreshTimer();
  void Discover(NodePool* pool);
  void Refresh();
  void ApplyTopology(SlotMap map);
  void UpdateReachable();
  NodePool* FindPool(const std::string& address);
  NodePool* GetOrCreatePool(const std::string& address);
  Status NotConnectedStatus() const;

  void Dispatch(const OpPtr& op);
  void OnReply(const OpPtr& op, StatusOr<Reply> reply);
  void RetryLater(const OpPtr& op, std::chrono::milliseconds delay);
  void Complete(const OpPtr& op, StatusOr<Reply> result);
  void Finish(const std::shared_ptr<Batch>& batch);
  void OnDeadline(const std::shared_ptr<Batch>& batch);

  boost::asio::io_context* io_;
  const ClientOptions& options_;
  ClientState* state_;

  std::map<std::string, std::unique_ptr<NodePool>> pools_;  // every live pool, by address
  std::vector<std::unique_ptr<NodePool>> retired_;          // shut down, freed on a later turn
  bool discovered_ = false;   // mode known (and, in cluster mode, a slot map applied)
  bool discovering_ = false;  // INFO / CLUSTER SLOTS in flight
  bool cluster_ = false;
  std::string standalone_;  // standalone mode: the node's address
  SlotMap map_;
  bool refreshing_ = false;
  bool refresh_again_ = false;
  size_t round_robin_ = 0;
  bool reachable_ = false;
  bool shutting_down_ = false;
  std::map<Batch*, std::shared_ptr<Batch>> live_;       // unfinished batches
  std::map<NodePool*, Connection*>* pinned_ = nullptr;  // during Submit: connection per node
  boost::asio::steady_timer health_timer_;
  boost::asio::steady_timer refresh_timer_;
  ThreadChecker thread_;  // the io_context's thread (debug builds check every entry point)
};

}  // namespace dais::redis
