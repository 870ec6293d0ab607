// Distributed lease locks on Redis (standalone or Cluster) with fencing tokens, watchdog renewal,
// a model / version / node hierarchy with intention semantics, and an optional replication check.
// Design, key layout, scripts and failure modes: docs/locks.md.
//
// A lease lock is only safe together with fencing: every grant carries a token that only grows
// (per model), and the protected resource must reject a lower token than it has seen
// (FencedTable, fenced_table.h). Lost() tells a holder that it must stop, but a holder paused at
// the wrong moment can act before noticing; the token is what stops its effect.
//
// Thread-safety: LockService and Lease are thread-safe. The blocking calls (TryAcquire, Acquire,
// Release, ~Lease) must not run on the redis::Client's I/O thread (they return
// FailedPrecondition there). Lost callbacks run on the service's watchdog thread.
//
// Ownership: the service borrows the redis::Client, which must outlive it. Leases must be
// released or destroyed before their LockService; leases still alive when the service is
// destroyed are released (best effort) and reported lost.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "dais/clock.h"
#include "dais/status.h"
#include "locks/lock_types.h"
#include "redis/client.h"

namespace dais::locks {

namespace detail {
struct LeaseState;
struct LockCore;
}  // namespace detail

struct LockServiceOptions {
  // Identifies this process in owners ("node-a/5f0c2e..."); required, no whitespace.
  std::string node_id;
  // Default lease (Redis-side expiry of a grant), renewed by the watchdog every renew_interval.
  std::chrono::milliseconds lease{30000};
  // 0 = lease / 3.
  std::chrono::milliseconds renew_interval{0};
  // The holder considers its lease lost at (time the granting/renewing request was sent) + lease
  // - safety_margin, on the monotonic clock, unless a renewal succeeded meanwhile. Covers clock
  // rate differences and the time the reply took. 0 = lease / 10.
  std::chrono::milliseconds safety_margin{0};
  // After a grant, WAIT for this many replicas to acknowledge it within wait_timeout; if fewer
  // do, the grant is undone and the caller gets Unavailable. 0 = off (docs: deploy/redis/
  // replication.md for what it does and does not guarantee).
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{100};
  // Timeout of one Redis round trip (acquire attempt, release, renewal).
  std::chrono::milliseconds command_timeout{1000};
  // Blocked Acquire calls wait for a wake-up with BLPOP on a connection of their own: at most this
  // many such connections (separate redis::Clients, created on first contention and reused).
  // Beyond it, waiters poll with jittered exponential backoff up to max_backoff.
  int max_blocking_waiters = 4;
  std::chrono::milliseconds max_backoff{200};
  // Longest single wait for a wake-up before re-trying anyway (safety net for a lost wake-up).
  std::chrono::milliseconds max_wait_slice{2000};
  // Monotonic clock seam for the holder-side deadline; default std::chrono::steady_clock::now.
  std::function<SteadyTime()> clock;
};

// Per-acquire settings.
struct AcquireOptions {
  // 0 = LockServiceOptions::lease.
  std::chrono::milliseconds lease{0};
  // Called once, on the watchdog thread, when the lease is lost: renewal refused (the key expired
  // or was broken), or the holder-side deadline passed without a successful renewal (Redis
  // unreachable, holder paused). The Status says which. Not called after Release(). Must not
  // block for long; it may call Lease::Release.
  std::function<void(const Status&)> on_lost;
};

class LockService;

// A granted lock. Destroying it releases it (best effort, one round trip).
class Lease {
 public:
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  const LockResource& resource() const;
  // The fencing token of this grant: larger than every token issued before for the same model
  // (any level). Pass it to the protected resource (FencedTable).
  int64_t token() const;
  // node_id + "/" + 16 random hex digits; unique per grant.
  const std::string& owner() const;
  // True once the lease is lost (see AcquireOptions::on_lost) or released. Evaluates the
  // holder-side deadline at the call, so it is exact even if the watchdog is late.
  bool Lost() const;
  // OK while held; FailedPrecondition with the reason once lost or released.
  Status Check() const;
  // The holder-side deadline (moves forward with each successful renewal).
  SteadyTime deadline() const;
  // Compare-and-delete by owner (one round trip). OK when this grant was deleted;
  // FailedPrecondition when the key no longer belonged to this owner (expired, broken, taken
  // over); Unavailable / DeadlineExceeded when Redis did not answer (the lease then expires on
  // its own). A second call returns FailedPrecondition. Stops the renewal either way.
  Status Release();

  // Test hook: while suspended the watchdog sends no renewals (simulates a paused holder; the
  // holder-side deadline still applies).
  void SuspendRenewalForTesting(bool suspended);

 private:
  friend class LockService;
  Lease(std::shared_ptr<detail::LeaseState> state, std::shared_ptr<detail::LockCore> core);
  std::string ResourceName() const;
  std::shared_ptr<detail::LeaseState> state_;
  std::shared_ptr<detail::LockCore> core_;
};

class LockService {
 public:
  // InvalidArgument for bad options (empty node_id, lease < 30 ms, renew_interval or
  // safety_margin not below the lease). Starts the watchdog thread. Does not contact Redis.
  static StatusOr<std::unique_ptr<LockService>> Create(redis::Client* client,
                                                       LockServiceOptions options);
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // One attempt (one round trip). Aborted when the lock (or, for MODEL, an intention; for VERSION
  // and NODE, the MODEL lock) is held by someone else; Unavailable / DeadlineExceeded when Redis
  // did not answer (a grant that may have happened is undone in the background); Unavailable when
  // wait_replicas are configured and not reached (the grant is undone).
  StatusOr<std::unique_ptr<Lease>> TryAcquire(const LockResource& resource,
                                              AcquireOptions options = {});
  // Attempts until granted or `timeout` passed (DeadlineExceeded, naming the holder). Between
  // attempts it waits for a wake-up that every release and break of the same model sends (BLPOP
  // on a per-waiter list, on a connection of its own), bounded by the blocking lock's remaining
  // lease and max_wait_slice; transport errors are retried with backoff. Every attempt of one call
  // uses the same owner, so a grant whose reply was lost is picked up by the next attempt.
  // Not reentrant: a second Acquire of a lock this process holds waits like any other contender.
  StatusOr<std::unique_ptr<Lease>> Acquire(const LockResource& resource,
                                           std::chrono::milliseconds timeout,
                                           AcquireOptions options = {});

  const LockServiceOptions& options() const;

 private:
  struct Impl;
  explicit LockService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Operator functions (for `dais locks list|inspect|break`). Blocking; not on the client's I/O
// thread. Unavailable when Redis does not answer.

// Every lock of the models whose name matches the glob `model_pattern` (Redis MATCH syntax;
// "*" = all), found by SCAN on every master (models that ever had a grant), each model read
// atomically. Sorted by model, then name.
StatusOr<std::vector<LockInfo>> List(redis::Client* client, std::string_view model_pattern = "*");
// The hierarchy of one model: its MODEL lock, VERSION/NODE locks, intentions, fence, waiters.
StatusOr<ModelLockState> Inspect(redis::Client* client, std::string_view model);
// Force-deletes one lock (a VERSION/NODE lock together with its intention mark), whoever holds
// it, and wakes the model's waiters. Returns what it removed (empty when nothing was held).
// Logged with LOG_WARNING. The fence is kept, so later grants still get higher tokens; the
// broken holder learns it at its next renewal and its late effects are fenced.
StatusOr<std::vector<LockInfo>> Break(redis::Client* client, const LockResource& resource);
// Force-deletes every lock and intention of `model` (not the fence). Logged with LOG_WARNING.
StatusOr<std::vector<LockInfo>> BreakModel(redis::Client* client, std::string_view model);

}  // namespace dais::locks
