#include "locks/lock_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "locks/lock_metrics.h"
#include "locks/lock_scripts.h"

namespace dais::locks {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using RealClock = std::chrono::steady_clock;

namespace {

std::string Ms(milliseconds d) { return std::to_string(d.count()); }

double Seconds(SteadyTime::duration d) { return std::chrono::duration<double>(d).count(); }

// A Redis error reply as a Status: the server's transient states (replicas missing, failover,
// loading, busy script, out of memory) are Unavailable (retry); anything else is a bug in our
// scripts (Internal).
Status ErrorReplyStatus(std::string_view what, const std::string& error) {
  for (const char* transient : {"NOREPLICAS", "READONLY", "LOADING", "CLUSTERDOWN", "MASTERDOWN",
                                "BUSY", "OOM", "TRYAGAIN"}) {
    if (error.starts_with(transient)) return Unavailable(std::string(what) + ": " + error);
  }
  return Internal(std::string(what) + ": " + error);
}

}  // namespace

namespace detail {

// One grant. The immutable part is set before the state is shared; the rest is guarded by mu.
struct LeaseState {
  LockResource resource;
  internal::LockKeys keys;
  std::string owner;
  int64_t token = 0;
  milliseconds lease{0}, renew_interval{0}, margin{0};
  internal::LockMetrics* metrics = nullptr;
  std::function<void(const Status&)> on_lost;
  SteadyTime granted_at;

  Mutex mu;
  SteadyTime deadline DAIS_GUARDED_BY(mu);
  SteadyTime next_renew DAIS_GUARDED_BY(mu);
  bool renew_in_flight DAIS_GUARDED_BY(mu) = false;
  bool suspended DAIS_GUARDED_BY(mu) = false;
  bool lost DAIS_GUARDED_BY(mu) = false;
  bool released DAIS_GUARDED_BY(mu) = false;
  bool notified DAIS_GUARDED_BY(mu) = false;  // on_lost has been called
  bool hold_observed DAIS_GUARDED_BY(mu) = false;
  Status reason DAIS_GUARDED_BY(mu);

  void ObserveHoldLocked(SteadyTime now) DAIS_REQUIRES(mu) {
    if (hold_observed) return;
    hold_observed = true;
    metrics->hold.Observe(Seconds(now - granted_at));
  }
  // No-op once lost or released.
  void MarkLostLocked(Status why, bool expired, SteadyTime now) DAIS_REQUIRES(mu) {
    if (lost || released) return;
    lost = true;
    reason = std::move(why);
    metrics->lost.Increment();
    if (expired) metrics->expirations.Increment();
    ObserveHoldLocked(now);
    LOG_WARNING("lock {} (owner {}, token {}) lost: {}", resource.ToString(), owner, token,
                reason.message());
  }
  // Lost by the holder-side deadline at `now`? Marks it.
  void CheckDeadlineLocked(SteadyTime now) DAIS_REQUIRES(mu) {
    if (!lost && !released && now >= deadline) {
      MarkLostLocked(DeadlineExceeded(fmt::format("lock {}: lease deadline passed without a "
                                                  "successful renewal",
                                                  resource.ToString())),
                     /*expired=*/true, now);
    }
  }
};

// What the service, its leases, its watchdog and in-flight renewals share.
struct LockCore {
  LockServiceOptions options;  // immutable after Create

  Mutex mu;
  CondVar cv{&mu};
  redis::Client* client DAIS_GUARDED_BY(mu) = nullptr;  // null once the service is destroyed
  std::vector<std::shared_ptr<LeaseState>> leases DAIS_GUARDED_BY(mu);
  bool kicked DAIS_GUARDED_BY(mu) = false;
  bool stopping DAIS_GUARDED_BY(mu) = false;

  SteadyTime Now() const { return options.clock(); }
  void Kick() {
    MutexLock l(&mu);
    kicked = true;
    cv.Signal();
  }
  redis::Client* Client() {
    MutexLock l(&mu);
    return client;
  }
  // Waits for a Kick or `d`. (No analysis inside: CondVar's DAIS_REQUIRES names its own pointer to
  // mu.)
  void WaitForKick(SteadyTime::duration d) DAIS_REQUIRES(mu) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    cv.WaitUntil(RealClock::now() + d);
  }
};

}  // namespace detail

using detail::LeaseState;
using detail::LockCore;

namespace {

void SendRenew(const std::shared_ptr<LockCore>& core, const std::shared_ptr<LeaseState>& st,
               SteadyTime sent) {
  redis::Client* client = core->Client();
  if (client == nullptr) return;
  const auto deadline =
      RealClock::now() + std::min(st->renew_interval, core->options.command_timeout);
  client->Eval(
      internal::RenewScript(), {st->keys.lock, st->keys.intents},
      {st->owner, Ms(st->lease), st->keys.level, st->keys.member}, deadline,
      [core, st, sent](StatusOr<redis::Reply> r) {
        {
          MutexLock l(&st->mu);
          st->renew_in_flight = false;
          if (!st->lost && !st->released) {
            const bool answered = r.ok() && r->type == redis::Reply::Type::kInteger;
            if (answered && r->integer == 1) {
              st->deadline = std::max(st->deadline, sent + st->lease - st->margin);
              st->next_renew = sent + st->renew_interval;
              st->metrics->renewals.Increment();
            } else if (answered) {
              st->metrics->renewal_failures.Increment();
              st->MarkLostLocked(
                  FailedPrecondition(fmt::format(
                      "lock {}: renewal refused, the lease expired or was broken (owner {})",
                      st->resource.ToString(), st->owner)),
                  /*expired=*/false, core->Now());
            } else {
              // No answer (or an error reply): retry soon; the deadline decides when to give up.
              st->metrics->renewal_failures.Increment();
              LOG_VERBOSE(1, "lock {}: renewal failed: {}", st->resource.ToString(),
                          r.ok() ? redis::ReplyToString(*r) : r.status().ToString());
              st->next_renew = core->Now() + std::max(milliseconds(5), st->renew_interval / 4);
            }
          }
        }
        core->Kick();
      });
}

// The watchdog: renews every lease every renew_interval, marks leases whose holder-side deadline
// passed, and calls on_lost callbacks. Renewals are asynchronous (their callbacks only update
// state on the redis I/O thread and kick this thread), so this thread never waits for Redis.
void WatchdogLoop(std::shared_ptr<LockCore> core) {
  for (;;) {
    std::vector<std::shared_ptr<LeaseState>> snapshot;
    {
      MutexLock l(&core->mu);
      if (core->stopping) return;
      core->kicked = false;
      snapshot = core->leases;
    }
    const SteadyTime now = core->Now();
    SteadyTime next = now + milliseconds(250);
    std::vector<LeaseState*> done;
    for (const std::shared_ptr<LeaseState>& st : snapshot) {
      std::function<void(const Status&)> callback;
      Status reason;
      bool renew = false;
      {
        MutexLock l(&st->mu);
        st->CheckDeadlineLocked(now);
        if (st->lost || st->released) {
          if (st->lost && !st->released && !st->notified) {
            st->notified = true;
            callback = st->on_lost;
            reason = st->reason;
          }
          done.push_back(st.get());
        } else {
          if (!st->suspended && !st->renew_in_flight && now >= st->next_renew) {
            st->renew_in_flight = true;
            renew = true;
          }
          next = std::min(next, st->deadline);
          if (!st->suspended && !st->renew_in_flight) next = std::min(next, st->next_renew);
        }
      }
      if (renew) SendRenew(core, st, now);
      if (callback) callback(reason);
    }
    MutexLock l(&core->mu);
    if (!done.empty()) {
      std::erase_if(core->leases, [&](const std::shared_ptr<LeaseState>& s) {
        return std::find(done.begin(), done.end(), s.get()) != done.end();
      });
    }
    if (core->stopping) return;
    if (core->kicked) continue;
    auto wait =
        std::clamp<SteadyTime::duration>(next - core->Now(), milliseconds(1), milliseconds(250));
    core->WaitForKick(wait);
  }
}

// The outcome of one acquire round trip.
struct Attempt {
  Status status;  // transport failure, script error, or a failed WAIT (grant undone)
  bool granted = false;
  bool answered = false;  // the script's reply arrived
  int64_t token = 0;
  std::string why, holder;
  milliseconds hint{0};
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Lease

Lease::Lease(std::shared_ptr<LeaseState> state, std::shared_ptr<LockCore> core)
    : state_(std::move(state)), core_(std::move(core)) {}

Lease::~Lease() {
  bool released;
  {
    MutexLock l(&state_->mu);
    released = state_->released;
  }
  if (!released) {
    Status s = Release();
    if (!s.ok())
      LOG_VERBOSE(1, "lock {}: release on destruction: {}", ResourceName(), s.ToString());
  }
}

const LockResource& Lease::resource() const { return state_->resource; }
int64_t Lease::token() const { return state_->token; }
const std::string& Lease::owner() const { return state_->owner; }

bool Lease::Lost() const { return !Check().ok(); }

Status Lease::Check() const {
  bool kick = false;
  Status result;
  {
    MutexLock l(&state_->mu);
    if (state_->released) return FailedPrecondition("lock " + ResourceName() + ": released");
    if (!state_->lost) {
      state_->CheckDeadlineLocked(core_->Now());
      kick = state_->lost;
    }
    if (state_->lost) result = state_->reason;
  }
  if (kick) core_->Kick();  // the watchdog calls on_lost
  if (!result.ok()) return FailedPrecondition(result.message());
  return OkStatus();
}

SteadyTime Lease::deadline() const {
  MutexLock l(&state_->mu);
  return state_->deadline;
}

void Lease::SuspendRenewalForTesting(bool suspended) {
  {
    MutexLock l(&state_->mu);
    state_->suspended = suspended;
  }
  core_->Kick();
}

std::string Lease::ResourceName() const { return state_->resource.ToString(); }

Status Lease::Release() {
  LeaseState& st = *state_;
  {
    MutexLock l(&st.mu);
    if (st.released) return FailedPrecondition("lock " + ResourceName() + ": already released");
    st.released = true;
    st.ObserveHoldLocked(core_->Now());
  }
  core_->Kick();
  redis::Client* client = core_->Client();
  if (client == nullptr) return FailedPrecondition("lock service destroyed");
  std::vector<std::string> keys = {st.keys.lock, st.keys.intents, st.keys.waiters};
  std::vector<std::string> args = {st.owner, st.keys.member, st.keys.wake, ""};
  StatusOr<redis::Reply> r =
      client->RunEval(internal::ReleaseScript(), keys, args, core_->options.command_timeout);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kFailedPrecondition) {
      // Called on the client's I/O thread: release without waiting.
      client->Eval(internal::ReleaseScript(), std::move(keys), std::move(args),
                   RealClock::now() + core_->options.command_timeout,
                   [](StatusOr<redis::Reply>) {});
    }
    return r.status().WithPrefix("lock " + ResourceName() + ": release");
  }
  if (r->is_error()) return ErrorReplyStatus("lock release", r->str);
  if (r->type == redis::Reply::Type::kInteger && r->integer == 1) return OkStatus();
  return FailedPrecondition(fmt::format(
      "lock {}: no longer held by {} (expired, broken or taken over)", ResourceName(), st.owner));
}

// ---------------------------------------------------------------------------------------------
// LockService

struct LockService::Impl {
  std::shared_ptr<LockCore> core;
  std::thread watchdog;

  Mutex mu;
  std::mt19937_64 rng DAIS_GUARDED_BY(mu);
  std::vector<std::unique_ptr<redis::Client>> idle_waiters DAIS_GUARDED_BY(mu);
  int waiters_created DAIS_GUARDED_BY(mu) = 0;

  ~Impl();
  std::string NewOwner();
  std::unique_ptr<redis::Client> BorrowWaiter();
  void ReturnWaiter(std::unique_ptr<redis::Client> c);
  Attempt RunAttempt(redis::Client* client, const internal::LockKeys& k, const std::string& owner,
                     milliseconds lease, const std::string& waiter, milliseconds waiter_ttl);
  void Undo(redis::Client* client, const internal::LockKeys& k, const std::string& owner,
            const std::string& drop_waiter, bool wait);
  StatusOr<std::unique_ptr<Lease>> Acquire(const LockResource& resource, milliseconds timeout,
                                           bool blocking, AcquireOptions options);
};

LockService::Impl::~Impl() {
  {
    MutexLock l(&core->mu);
    core->stopping = true;
    core->cv.SignalAll();
  }
  if (watchdog.joinable()) watchdog.join();
  std::vector<std::shared_ptr<LeaseState>> leases;
  redis::Client* client;
  {
    MutexLock l(&core->mu);
    leases.swap(core->leases);
    client = core->client;
  }
  for (const std::shared_ptr<LeaseState>& st : leases) {
    bool release = false;
    {
      MutexLock l(&st->mu);
      if (!st->released) {
        st->MarkLostLocked(FailedPrecondition("lock service destroyed"), false, core->Now());
        st->released = true;
        release = !st->notified;
      }
    }
    if (release && client != nullptr) {
      Undo(client, st->keys, st->owner, "", /*wait=*/true);
    }
  }
  MutexLock l(&core->mu);
  core->client = nullptr;
}

std::string LockService::Impl::NewOwner() {
  uint64_t r;
  {
    MutexLock l(&mu);
    r = rng();
  }
  return fmt::format("{}/{:016x}", core->options.node_id, r);
}

std::unique_ptr<redis::Client> LockService::Impl::BorrowWaiter() {
  {
    MutexLock l(&mu);
    if (!idle_waiters.empty()) {
      std::unique_ptr<redis::Client> c = std::move(idle_waiters.back());
      idle_waiters.pop_back();
      return c;
    }
    if (waiters_created >= core->options.max_blocking_waiters) return nullptr;
    ++waiters_created;
  }
  redis::Client* main = core->Client();
  std::unique_ptr<redis::Client> created;
  if (main != nullptr) {
    redis::ClientOptions o = main->options();
    o.connections_per_node = 1;  // one blocked BLPOP per client at a time
    auto c = redis::Client::Create(std::move(o));
    if (c.ok() && (*c)->WaitUntilReachable(std::max(milliseconds(1000), o.connect_timeout * 2))) {
      created = std::move(*c);
    }
  }
  if (created == nullptr) {
    MutexLock l(&mu);
    --waiters_created;
  }
  return created;
}

void LockService::Impl::ReturnWaiter(std::unique_ptr<redis::Client> c) {
  if (c == nullptr) return;
  MutexLock l(&mu);
  idle_waiters.push_back(std::move(c));
}

Attempt LockService::Impl::RunAttempt(redis::Client* client, const internal::LockKeys& k,
                                      const std::string& owner, milliseconds lease,
                                      const std::string& waiter, milliseconds waiter_ttl) {
  const LockServiceOptions& o = core->options;
  std::vector<std::string> keys = {k.lock, k.model, k.intents, k.fence, k.waiters};
  std::vector<std::string> args = {owner,  Ms(lease),      k.level, k.member,
                                   waiter, Ms(waiter_ttl), k.wake};
  Attempt a;
  StatusOr<redis::Reply> r = Unavailable("unset");
  StatusOr<redis::Reply> wait = Unavailable("unset");
  if (o.wait_replicas <= 0) {
    r = client->RunEval(internal::AcquireScript(), std::move(keys), std::move(args),
                        o.command_timeout);
  } else {
    // EVAL and WAIT in one batch: one connection, in order, so WAIT covers the grant's write.
    redis::Command eval = {"EVAL", internal::AcquireScript().source(), "5"};
    eval.insert(eval.end(), keys.begin(), keys.end());
    eval.insert(eval.end(), args.begin(), args.end());
    std::vector<StatusOr<redis::Reply>> replies =
        client->RunBatch({{k.lock, std::move(eval)},
                          {k.lock, {"WAIT", std::to_string(o.wait_replicas), Ms(o.wait_timeout)}}},
                         o.command_timeout + o.wait_timeout);
    r = std::move(replies[0]);
    wait = std::move(replies[1]);
  }
  if (!r.ok()) {
    a.status = r.status();
    return a;
  }
  if (r->is_error()) {
    a.status = ErrorReplyStatus("lock acquire", r->str);
    return a;
  }
  const std::vector<redis::Reply>& e = r->elements;
  if (r->type != redis::Reply::Type::kArray || e.size() < 3) {
    a.status = Internal("lock acquire script: unexpected reply " + redis::ReplyToString(*r));
    return a;
  }
  a.answered = true;
  if (e[0].integer == 1) {
    a.granted = true;
    a.token = e[1].integer;
    if (o.wait_replicas > 0) {
      const bool acked = wait.ok() && wait->type == redis::Reply::Type::kInteger &&
                         wait->integer >= o.wait_replicas;
      if (!acked) {
        Undo(client, k, owner, "", /*wait=*/true);
        a.status = Unavailable(fmt::format(
            "lock: grant not acknowledged by {} replica(s) within {} ms ({}); grant undone",
            o.wait_replicas, o.wait_timeout.count(),
            wait.ok() ? redis::ReplyToString(*wait) : wait.status().ToString()));
      }
    }
    return a;
  }
  a.why = e[1].str;
  a.holder = e[2].str;
  if (e.size() > 3) a.hint = milliseconds(std::max<int64_t>(0, e[3].integer));
  return a;
}

void LockService::Impl::Undo(redis::Client* client, const internal::LockKeys& k,
                             const std::string& owner, const std::string& drop_waiter, bool wait) {
  std::vector<std::string> keys = {k.lock, k.intents, k.waiters};
  std::vector<std::string> args = {owner, k.member, k.wake, drop_waiter};
  if (wait) {
    StatusOr<redis::Reply> r = client->RunEval(internal::ReleaseScript(), std::move(keys),
                                               std::move(args), core->options.command_timeout);
    if (!r.ok()) LOG_VERBOSE(1, "lock undo of {}: {}", k.lock, r.status().ToString());
    return;
  }
  client->Eval(internal::ReleaseScript(), std::move(keys), std::move(args),
               RealClock::now() + core->options.command_timeout, [](StatusOr<redis::Reply>) {});
}

StatusOr<std::unique_ptr<Lease>> LockService::Impl::Acquire(const LockResource& resource,
                                                            milliseconds timeout, bool blocking,
                                                            AcquireOptions ao) {
  RETURN_IF_ERROR(ValidateResource(resource));
  const LockServiceOptions& o = core->options;
  const milliseconds lease = ao.lease.count() > 0 ? ao.lease : o.lease;
  if (lease < milliseconds(30)) return InvalidArgument("lock: lease below 30 ms");
  // Renewal interval and margin: as configured for the default lease, else derived.
  const bool default_lease = lease == o.lease;
  const milliseconds renew =
      default_lease && o.renew_interval.count() > 0 ? o.renew_interval : lease / 3;
  const milliseconds margin =
      default_lease && o.safety_margin.count() > 0 ? o.safety_margin : lease / 10;
  redis::Client* client = core->Client();
  if (client == nullptr) return FailedPrecondition("lock service destroyed");

  const internal::LockKeys keys = internal::KeysFor(resource);
  internal::LockMetrics& metrics = internal::LockMetrics::For(resource.level);
  const std::string owner = NewOwner();
  const auto start = RealClock::now();
  const auto give_up = start + timeout;
  bool uncertain = false;   // an attempt went unanswered: it may have granted
  bool registered = false;  // we are in the model's waiter set
  milliseconds backoff{2};
  Attempt last;
  std::unique_ptr<redis::Client> waiter;
  std::minstd_rand jitter(static_cast<uint32_t>(std::hash<std::string>()(owner)));

  for (;;) {
    const SteadyTime sent = core->Now();
    const milliseconds waiter_ttl =
        blocking ? duration_cast<milliseconds>(give_up - RealClock::now()) + milliseconds(2000)
                 : milliseconds(0);
    Attempt a = RunAttempt(client, keys, owner, lease, blocking ? owner : "", waiter_ttl);
    if (!a.answered) uncertain = true;
    if (a.granted) {
      ReturnWaiter(std::move(waiter));
      if (!a.status.ok()) return a.status;  // WAIT not acknowledged: undone
      metrics.wait.Observe(Seconds(RealClock::now() - start));
      auto st = std::make_shared<LeaseState>();
      st->resource = resource;
      st->keys = keys;
      st->owner = owner;
      st->token = a.token;
      st->lease = lease;
      st->renew_interval = renew;
      st->margin = margin;
      st->metrics = &metrics;
      st->on_lost = std::move(ao.on_lost);
      st->granted_at = sent;
      {
        MutexLock l(&st->mu);
        st->deadline = sent + lease - margin;
        st->next_renew = sent + renew;
      }
      {
        MutexLock l(&core->mu);
        core->leases.push_back(st);
        core->kicked = true;
        core->cv.Signal();
      }
      return std::unique_ptr<Lease>(new Lease(std::move(st), core));
    }
    if (a.answered) {
      registered = registered || blocking;
      last = a;
    } else if (!last.answered) {
      last = a;
    }
    if (!blocking) break;
    const auto now = RealClock::now();
    if (now >= give_up) break;
    const auto remaining = duration_cast<milliseconds>(give_up - now) + milliseconds(1);
    if (!a.answered) {  // transport failure: back off and retry
      std::this_thread::sleep_for(std::min(backoff, remaining));
      backoff = std::min(backoff * 2, o.max_backoff);
      continue;
    }
    // Refused: wait for a release/break of this model to wake us, at most until the blocking
    // lock would expire by itself (hint) and max_wait_slice.
    const milliseconds slice = std::max(
        milliseconds(1), std::min({remaining, a.hint + milliseconds(2), o.max_wait_slice}));
    if (waiter == nullptr) waiter = BorrowWaiter();
    if (waiter != nullptr) {
      const std::string list = keys.wake + owner;
      StatusOr<redis::Reply> r =
          waiter->Run({list, {"BLPOP", list, fmt::format("{:.3f}", slice.count() / 1000.0)}},
                      slice + o.command_timeout);
      if (!r.ok() || r->is_error()) std::this_thread::sleep_for(std::min(backoff, slice));
    } else {
      const auto jittered = milliseconds(
          backoff.count() / 2 + static_cast<int64_t>(jitter() % (backoff.count() / 2 + 1)));
      std::this_thread::sleep_for(std::min(slice, jittered));
      backoff = std::min(backoff * 2, o.max_backoff);
    }
  }
  ReturnWaiter(std::move(waiter));
  if (uncertain || registered) Undo(client, keys, owner, registered ? owner : "", false);
  if (!last.answered) {
    return last.status.WithPrefix("lock " + resource.ToString() + ": acquire");
  }
  const std::string held = last.why == "held"    ? "held by " + last.holder
                           : last.why == "model" ? "the MODEL lock is held by " + last.holder
                                                 : "intentions are held (e.g. " + last.holder + ")";
  if (blocking) {
    return DeadlineExceeded(fmt::format("lock {}: not acquired within {} ms: {}",
                                        resource.ToString(), timeout.count(), held));
  }
  return Status(StatusCode::kAborted, "lock " + resource.ToString() + ": " + held);
}

LockService::LockService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LockService::~LockService() = default;

StatusOr<std::unique_ptr<LockService>> LockService::Create(redis::Client* client,
                                                           LockServiceOptions options) {
  if (client == nullptr) return InvalidArgument("lock service: no redis client");
  if (options.node_id.empty() ||
      std::any_of(options.node_id.begin(), options.node_id.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    return InvalidArgument("lock service: node_id must be non-empty without whitespace");
  }
  if (options.lease < milliseconds(30)) return InvalidArgument("lock service: lease below 30 ms");
  const milliseconds renew =
      options.renew_interval.count() > 0 ? options.renew_interval : options.lease / 3;
  const milliseconds margin =
      options.safety_margin.count() > 0 ? options.safety_margin : options.lease / 10;
  if (renew.count() <= 0 || renew + margin >= options.lease) {
    return InvalidArgument("lock service: renew_interval + safety_margin must be below the lease");
  }
  if (options.wait_replicas < 0 || options.wait_timeout.count() < 0 ||
      options.command_timeout.count() <= 0 || options.max_blocking_waiters < 0 ||
      options.max_backoff.count() <= 0 || options.max_wait_slice.count() <= 0) {
    return InvalidArgument("lock service: negative or zero limits");
  }
  if (!options.clock) options.clock = [] { return RealClock::now(); };

  auto impl = std::make_unique<Impl>();
  impl->core = std::make_shared<LockCore>();
  impl->core->options = std::move(options);
  {
    MutexLock l(&impl->core->mu);
    impl->core->client = client;
  }
  {
    MutexLock l(&impl->mu);
    impl->rng.seed(std::random_device()() ^ static_cast<uint64_t>(NowNs()));
  }
  impl->watchdog = std::thread(WatchdogLoop, impl->core);
  return std::unique_ptr<LockService>(new LockService(std::move(impl)));
}

StatusOr<std::unique_ptr<Lease>> LockService::TryAcquire(const LockResource& resource,
                                                         AcquireOptions options) {
  return impl_->Acquire(resource, milliseconds(0), false, std::move(options));
}

StatusOr<std::unique_ptr<Lease>> LockService::Acquire(const LockResource& resource,
                                                      milliseconds timeout,
                                                      AcquireOptions options) {
  return impl_->Acquire(resource, timeout, timeout.count() > 0, std::move(options));
}

const LockServiceOptions& LockService::options() const { return impl_->core->options; }

}  // namespace dais::locks
