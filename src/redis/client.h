// Asynchronous Redis client for standalone servers and Redis Cluster, RESP2 over Boost.Asio.
// Concurrency model, routing and failure behaviour: docs/redis-client.md.
//
// Thread-safety: every method may be called from any thread, concurrently. Each Client runs one
// I/O thread of its own; all callbacks run on it, so they must be short and must not block (in
// particular they must not call the blocking Run* helpers or destroy the Client).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "redis/command.h"
#include "redis/options.h"
#include "redis/resp.h"
#include "redis/script.h"

namespace dais::redis {

class Client {
 public:
  // Validates `options` (InvalidArgument when malformed) and starts the I/O thread. Does NOT
  // require Redis to be reachable: it connects in the background and keeps retrying with
  // backoff; until connected, commands fail fast with Unavailable (Unauthenticated when the
  // server refused the credentials). The mode is detected on the first successful connection
  // (INFO cluster → cluster_enabled:1, then CLUSTER SLOTS).
  static StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  // Pending callbacks get Unavailable("redis client shutting down"); joins the I/O thread.
  // Must not run on the client's own I/O thread (i.e. not inside one of its callbacks).
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // False until the mode is detected.
  bool cluster_mode() const;
  // Standalone: connected and the last health PING answered. Cluster: every master in the slot
  // map so. False until the mode is detected.
  bool Reachable() const;
  // Addition: blocks until Reachable() or `timeout` passed; returns Reachable(). For start-up
  // and tests; not on the I/O thread.
  bool WaitUntilReachable(std::chrono::milliseconds timeout) const;

  // Asynchronous commands. `cb` is called exactly once, on the I/O thread: with the reply (a
  // Redis error reply is a Reply of type kError, not a Status error) or with a Status:
  // Unavailable (not connected, connection lost, shutting down), DeadlineExceeded (the callback
  // runs at the deadline even if the server never answers; a late reply is discarded),
  // InvalidArgument (empty command). In cluster mode MOVED (slot map updated and refreshed, retry
  // on the named node), ASK (ASKING + the command on the named node, map unchanged) and TRYAGAIN
  // (retry after 10 ms) are followed inside, up to max_redirections; beyond that the last
  // redirection error comes back as the reply.
  void Execute(KeyedCommand cmd, Deadline deadline, ReplyCallback cb);
  // Independent commands: grouped per node, each node's group written as one pipelined write on
  // one of its connections, all nodes in parallel. `cb` gets one result per command, in input
  // order, once all are answered or at the deadline (DeadlineExceeded for those unanswered).
  // Ordering: commands of one batch routed to the same node execute there in input order (e.g.
  // HSET then EXPIRE of a key); a redirected command loses that order. Not atomic. Separate
  // Execute/ExecuteBatch calls have no order between them (they may use different connections):
  // wait for the first callback, or put both in one batch.
  void ExecuteBatch(std::vector<KeyedCommand> cmds, Deadline deadline, BatchCallback cb);
  // EVALSHA script.sha1(); on NOSCRIPT, EVAL (which also loads the script). Routed by keys[0]
  // (any node without keys). In cluster mode all keys must share one slot (the server checks).
  void Eval(const Script& script, std::vector<std::string> keys, std::vector<std::string> args,
            Deadline deadline, ReplyCallback cb);
  // Runs `cmd` on one node ("host:port" as Masters() returns it), without following
  // redirections: e.g. INFO memory on each master. NotFound for a node not in Masters().
  void ExecuteOn(const std::string& node, Command cmd, Deadline deadline, ReplyCallback cb);
  // Standalone: the one node. Cluster: the masters of the current slot map. Empty until the mode
  // is detected.
  std::vector<std::string> Masters() const;

  // Blocking helpers for CLI tools and tests. timeout 0 = options.command_timeout. Called on the
  // client's own I/O thread they return FailedPrecondition instead of deadlocking.
  StatusOr<Reply> Run(KeyedCommand cmd, std::chrono::milliseconds timeout = {});
  std::vector<StatusOr<Reply>> RunBatch(std::vector<KeyedCommand> cmds,
                                        std::chrono::milliseconds timeout = {});
  StatusOr<Reply> RunEval(const Script& script, std::vector<std::string> keys,
                          std::vector<std::string> args, std::chrono::milliseconds timeout = {});
  StatusOr<Reply> RunOn(const std::string& node, Command cmd,
                        std::chrono::milliseconds timeout = {});

  const ClientOptions& options() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::redis
