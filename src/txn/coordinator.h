// The two-phase-commit coordinator of `dais txn` (docs/transactions.md).
//
// One transaction, on one worker thread (each worker holds its own connection per participant
// and to the decision log):
//   1. parameters validated against the declared type (400 naming the field; no database touched);
//   2. a keyed request claims its idempotency key in the log (a retry gets the first outcome);
//   3. the gate starts scoring (features + ModelInfer) while every participant runs its branch in
//      one pipeline: BEGIN, the declared statements (each checked: SQL error or expect_rows), and
//      the branch's events into the participant's outbox, all participants in parallel;
//   4. PREPARE TRANSACTION 'dais:<coordinator>:<txn>' on every participant, in parallel;
//   5. the commit decision is written to the log (durable), the caller is answered;
//   6. COMMIT PREPARED on every participant; the outbox relays are woken.
// Steps 3–4 run under the prepare budget (prepare_timeout_ms, 300 by default): a participant that
// does not answer in time, a failed branch or a refusing gate rolls every branch back and the
// answer names the reason. Whatever a crash interrupts, recovery finishes from the log
// (presumed abort): see Recover.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/trace_context.h"
#include "txn/gate.h"
#include "txn/pg.h"
#include "txn/txn_spec.h"

namespace dais::txn {

struct CoordinatorOptions {
  std::string id = "txn-1";  // part of every global id: recovery finds its own by it
  int workers = 32;          // transactions in flight at once (each holds 1 + P connections)
  int resolve_interval_ms = 1000;
  // Fault injection for the crash tests: the process kills itself (SIGKILL) at this step of the
  // first transaction that reaches it: after_branches, after_prepare, after_decision,
  // during_commit (after the first participant committed).
  std::string crash_at;
  // Tracing (docs/operations.md, "Tracing"): where a sampled transaction's span goes (none:
  // spans are not made), and the probability that a transaction without a sampled caller's
  // context is sampled.
  std::function<void(Span)> span_sink;
  double trace_sample_rate = 0;
};

// What the caller gets: an HTTP status and a JSON body.
struct Outcome {
  int http_status = 200;
  std::string body;
  // The transaction's request id and traceparent (its span as the parent), for the answer's
  // x-request-id / traceparent headers; set for every transaction request.
  std::string request_id = {}, traceparent = {};
};

// One action of recovery: commit or roll back a prepared transaction on a participant, or mark
// a decision done / aborted.
struct RecoveryAction {
  std::string participant;  // empty for log-only actions
  std::string gid;
  std::string action;  // "commit", "rollback", "mark done", "abort unfinished"
  std::string why;
};

// {"error": message}, escaped: the body of a refusal.
std::string ErrorJson(const std::string& message);

class Coordinator {
 public:
  // `gate` (may be null when no type has a gate) is borrowed.
  Coordinator(TxnSpecPtr spec, CoordinatorOptions options, Gate* gate);
  ~Coordinator();

  // Connects to the log and the participants, creates the log and outbox tables, runs recovery
  // (logging what it did), then starts the workers and the resolver. Participants that are down
  // are not an error: their prepared transactions are resolved when they return.
  Status Start();
  void Stop();

  // Queues a transaction; `done` runs once, on a worker thread. ResourceExhausted (503) when the
  // queue is full.
  // The trace context continues the caller's: the model gate's call and the outbox events carry
  // it, and a sampled transaction's span goes to options.span_sink.
  void Submit(std::string type, std::string body, std::string idempotency_key, CallTrace trace,
              std::function<void(Outcome)> done);
  // The logged outcome of a transaction (GET /v1/txn/<id>), read on a worker; `done` runs once.
  void Lookup(std::string txn_id, std::function<void(Outcome)> done);
  // Takes the coordinator id's lock in the log (one process per id); FailedPrecondition when
  // another process holds it. Start takes it; `dais txn recover` must too.
  Status LockId();

  // Recovery: resolves every prepared transaction of this coordinator on every reachable
  // participant from the log (commit where it says commit, roll back the rest unless in flight),
  // marks decisions done once no participant holds them, aborts keyed requests left "started".
  // With dry_run nothing is changed. Returns the actions (taken or that would be taken).
  StatusOr<std::vector<RecoveryAction>> Recover(bool dry_run);
  // Forgets `marked_done` (the log says done now) and returns the rest of finished_.
  std::set<std::string> Finished(const std::vector<std::string>& marked_done);

  // Called after transactions committed on a participant (the outbox relay's wake-up).
  void SetCommitListener(std::function<void(const std::string& participant)> listener) {
    on_commit_ = std::move(listener);
  }
  const TxnSpec& spec() const { return *spec_; }
  // False while the resolver's last pass failed (the decision log unreachable, or the id's lock
  // lost): /health/ready answers 503 then. True from a successful Start.
  bool Ready() const { return ready_.load(); }

 private:
  struct Worker;
  struct Job {
    std::string type, body, key;
    std::function<void(Outcome)> done;
    std::string lookup;  // non-empty: read this transaction's logged outcome instead
    CallTrace trace;
  };
  struct Txn;

  void WorkerLoop(Worker* w);
  Outcome Execute(Worker* w, Job& job);
  Outcome RunProtocol(Worker* w, Txn& t);
  bool RunBranches(Worker* w, Txn& t);
  bool Prepare(Worker* w, Txn& t);
  void RerunBrokenBranches(Worker* w, Txn& t, std::vector<pg::Work>* works);
  void RollBack(Worker* w, Txn& t, bool prepared);
  void Commit(Worker* w, Txn& t);
  Outcome Refuse(Worker* w, Txn& t, int status, const std::string& reason,
                 const std::string& message);
  void CrashPoint(const char* step);
  // Wraps job->done so that the answer carries the request id and traceparent and, when
  // sampled, the transaction's span is exported when it is answered.
  void TraceAnswer(Job* job, const std::shared_ptr<const ServerTrace>& trace,
                   std::shared_ptr<std::string> txn_id);
  void ResolverLoop();
  Outcome LookupOn(pg::Connection* log, const std::string& txn_id,
                   const std::string& connect_error);
  void UpdateInDoubtMetrics(size_t in_doubt, double oldest_age_s, size_t unmarked_commits);
  bool InFlight(const std::string& txn_id);

  TxnSpecPtr spec_;
  CoordinatorOptions options_;
  Gate* gate_;
  std::function<void(const std::string&)> on_commit_;

  std::mutex mu_;
  std::condition_variable cv_;           // workers: a job was queued (or stopping)
  std::condition_variable resolver_cv_;  // the resolver: stopping (its own, so that a job's
                                         // notify_one never wakes it instead of a worker)
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::set<std::string> in_flight_;  // txn ids being executed here (guarded by mu_)
  // Committed on every participant by this process and not yet marked done in the log (guarded
  // by mu_): not in doubt even while a participant is unreachable.
  std::set<std::string> finished_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::thread resolver_;
  std::unique_ptr<pg::Connection> resolver_log_;  // the resolver's own connections
  std::vector<std::unique_ptr<pg::Connection>> resolver_participants_;
  std::unique_ptr<pg::Connection> lock_conn_;  // holds the id's advisory lock (resolver thread)
  std::atomic<uint64_t> sequence_{0};
  std::atomic<bool> crashed_once_{false};
  std::atomic<bool> ready_{false};
};

}  // namespace dais::txn
