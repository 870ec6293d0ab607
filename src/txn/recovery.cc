// Coordinator recovery and the resolver (presumed abort), and lookups of logged outcomes.
#include <algorithm>
#include <map>

#include "common/logging.h"
#include "txn/coordinator.h"
#include "txn/decision_log.h"
#include "txn/txn_metrics.h"

namespace dais::txn {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kStepTimeout{3000};

struct PreparedXact {
  size_t participant = 0;
  std::string gid, txn_id;
  double age_s = 0;
};

double ToDouble(const std::optional<std::string>& s) { return s ? std::stod(*s) : 0.0; }

// What the participants hold: this coordinator's prepared transactions on each reachable one.
struct Scan {
  std::vector<std::string> names;
  std::vector<pg::Connection*> conns;  // null: unreachable
  std::vector<PreparedXact> prepared;
  bool all_reachable = true;
};

Scan ReadPrepared(const TxnSpec& spec, const std::string& prefix, pg::Deadline deadline,
                  std::vector<std::unique_ptr<pg::Connection>>* slots) {
  Scan scan;
  std::string error;
  slots->resize(spec.participants.size());
  for (const auto& [name, info] : spec.participants) {
    size_t i = scan.names.size();
    scan.names.push_back(name);
    pg::Connection* c = pg::EnsureConnected(&(*slots)[i], info, deadline, &error);
    scan.conns.push_back(c);
    if (!c) {
      scan.all_reachable = false;
      continue;
    }
    auto r = c->Run({{"SELECT gid, extract(epoch FROM now() - prepared)::float8"
                      " FROM pg_prepared_xacts WHERE database = current_database()"
                      " AND starts_with(gid, $1)",
                      {prefix}}},
                    deadline);
    if (!r.ok() || !(*r)[0].ok) {
      scan.all_reachable = false;
      scan.conns.back() = nullptr;
      continue;
    }
    for (const auto& row : (*r)[0].rows) {
      scan.prepared.push_back({i, *row[0], TxnIdOfGid(*row[0], prefix, name), ToDouble(row[1])});
    }
  }
  return scan;
}

// The answer logged for a transaction recovery aborts (what GET /v1/txn/<id> and a keyed retry
// get).
std::string AbortBody(const std::string& txn_id, const std::string& reason) {
  return "{\"txn_id\":\"" + txn_id + "\",\"outcome\":\"aborted\",\"reason\":\"" + reason +
         "\",\"error\":\"no commit decision was logged: rolled back by recovery\"}";
}

// For a dry run: the decision logged now ("" when none).
StatusOr<std::string> ReadDecidedState(pg::Connection* log, const std::string& txn_id,
                                       pg::Deadline deadline) {
  ASSIGN_OR_RETURN(auto o, ReadOutcome(log, txn_id, deadline));
  return o.has_value() ? o->state : std::string();
}

}  // namespace

Status Coordinator::LockId() {
  std::string error;
  const auto deadline = Clock::now() + kStepTimeout;
  if (lock_conn_ && !lock_conn_->broken()) return OkStatus();  // held for the session's life
  lock_conn_.reset();
  pg::Connection* c = pg::EnsureConnected(&lock_conn_, spec_->log, deadline, &error);
  if (!c) return Unavailable("decision log: " + error);
  auto locked = TryLockCoordinatorId(c, options_.id, deadline);
  if (!locked.ok()) {
    lock_conn_.reset();
    return locked.status();
  }
  if (!*locked) {
    lock_conn_.reset();
    return FailedPrecondition("coordinator id '" + options_.id +
                              "' is in use by another process (a running `dais txn serve`, or "
                              "`dais txn recover`): one process per id");
  }
  return OkStatus();
}

namespace {

using OpenDecisions = std::map<std::string, std::pair<std::string, double>>;  // txn -> state, age

// This coordinator's decisions not yet done: 'started' (keyed, undecided) and 'commit'.
StatusOr<OpenDecisions> ReadOpenDecisions(pg::Connection* log, const std::string& coordinator,
                                          pg::Deadline deadline) {
  auto open = log->Run({{"SELECT txn_id, state,"
                         " extract(epoch FROM now() - coalesce(decided_at, created_at))::float8"
                         " FROM dais_txn_log WHERE coordinator = $1"
                         " AND state IN ('started', 'commit')",
                         {coordinator}}},
                       deadline);
  if (!open.ok()) return open.status();
  if (!(*open)[0].ok) return Unavailable("decision log: " + pg::Describe((*open)[0]));
  OpenDecisions decisions;
  for (const auto& row : (*open)[0].rows) decisions[*row[0]] = {*row[1], ToDouble(row[2])};
  return decisions;
}

}  // namespace

std::set<std::string> Coordinator::Finished(const std::vector<std::string>& marked_done) {
  std::lock_guard lock(mu_);
  for (const std::string& txn : marked_done) finished_.erase(txn);
  return finished_;
}

StatusOr<std::vector<RecoveryAction>> Coordinator::Recover(bool dry_run) {
  std::string error;
  pg::Connection* log =
      pg::EnsureConnected(&resolver_log_, spec_->log, Clock::now() + kStepTimeout, &error);
  if (!log) return Unavailable("decision log: " + error);
  // A hung participant costs the scan a third of the step, not the log its time: the pass still
  // counts what is in doubt (issue 31).
  const Scan scan = ReadPrepared(*spec_, GlobalId(options_.id, ""), Clock::now() + kStepTimeout / 3,
                                 &resolver_participants_);
  const auto deadline = Clock::now() + kStepTimeout;
  const auto& [names, conns, prepared, all_reachable] = scan;
  ASSIGN_OR_RETURN(OpenDecisions decisions, ReadOpenDecisions(log, options_.id, deadline));

  auto& m = TxnMetrics::Get();
  std::vector<RecoveryAction> actions;
  std::map<std::string, bool> still_prepared;  // txn -> some participant still holds it
  // In doubt: prepared somewhere without a completed decision, counted once per transaction
  // (prepared on two participants is one transaction); a commit decision this process saw
  // committed everywhere (finished_) is not, even before it is marked done.
  std::set<std::string> in_doubt;
  const std::set<std::string> finished = Finished({});
  size_t unmarked_commits = 0;
  double oldest = 0;
  for (const PreparedXact& x : prepared) {
    if (InFlight(x.txn_id)) continue;
    std::string state = decisions.count(x.txn_id) ? decisions[x.txn_id].first : "";
    if (state != "commit") {
      // Decide abort in the log before rolling back (presumed abort made explicit): the first
      // decision written wins, so a commit the worker wrote meanwhile (or writes late) is seen
      // here, and a late commit write after this abort finds the abort and is not applied.
      auto decided = dry_run ? ReadDecidedState(log, x.txn_id, deadline)
                             : WriteDecision(log, x.txn_id, options_.id, "", "abort", 503,
                                             AbortBody(x.txn_id, "presumed_abort"), deadline);
      if (!decided.ok()) return decided.status();
      state = *decided;
    }
    bool commit = state == "commit" || state == "done";
    RecoveryAction a{names[x.participant], x.gid, commit ? "commit" : "rollback",
                     commit ? "the log holds a commit decision"
                            : "no commit decision in the log (presumed abort)"};
    bool resolved = dry_run;
    if (!dry_run) {
      auto r = conns[x.participant]->Exec(
          (commit ? "COMMIT PREPARED " : "ROLLBACK PREPARED ") + pg::Literal(x.gid), deadline);
      // 42704: it was resolved meanwhile (by the worker that owned it).
      resolved = r.ok() || r.status().message().find("42704") != std::string::npos ||
                 r.status().message().find("does not exist") != std::string::npos;
      if (resolved) {
        m.recovery.Get({a.action}).Increment();
        if (commit && on_commit_) on_commit_(names[x.participant]);
      } else {
        LOG_WARNING("txn recovery: {} {} on {}: {}", a.action, x.gid, a.participant,
                    r.status().message());
      }
    }
    if (!resolved) {
      in_doubt.insert(x.txn_id);
      oldest = std::max(oldest, x.age_s);
      still_prepared[x.txn_id] = true;
    }
    actions.push_back(std::move(a));
  }
  std::vector<std::string> done;
  for (const auto& [txn, sa] : decisions) {
    if (InFlight(txn)) continue;
    const auto& [state, age] = sa;
    if (state == "commit") {
      ++unmarked_commits;
      const bool held = still_prepared.count(txn) > 0;
      if (held || !all_reachable) {
        // Prepared here, or perhaps on the participant that cannot be asked.
        if (held || !finished.count(txn)) {
          in_doubt.insert(txn);
          oldest = std::max(oldest, age);
        }
        continue;
      }
      done.push_back(txn);
    } else if (state == "started") {
      actions.push_back({"", GlobalId(options_.id, txn), "abort unfinished",
                         "a keyed request the coordinator did not finish"});
      if (!dry_run) {
        auto decided = WriteDecision(log, txn, options_.id, "", "abort", 503,
                                     AbortBody(txn, "coordinator_restart"), deadline);
        if (decided.ok() && *decided == "abort") m.recovery.Get({"abort"}).Increment();
      }
    }
  }
  if (!done.empty()) {
    // Routine: transactions the workers committed since the last pass (one statement for all).
    if (dry_run || MarkDone(log, done, deadline).ok()) {
      if (!dry_run) Finished(done);
      actions.push_back({"", std::to_string(done.size()) + " transaction(s)", "mark done",
                         "committed on every participant"});
      if (!dry_run) m.recovery.Get({"mark_done"}).Increment(static_cast<double>(done.size()));
    }
  }
  if (!dry_run) UpdateInDoubtMetrics(in_doubt.size(), oldest, unmarked_commits);
  return actions;
}

void Coordinator::UpdateInDoubtMetrics(size_t in_doubt, double oldest_age_s,
                                       size_t unmarked_commits) {
  auto& m = TxnMetrics::Get();
  m.in_doubt.Set(static_cast<double>(in_doubt));
  m.in_doubt_age.Set(oldest_age_s);
  m.unmarked_commits.Set(static_cast<double>(unmarked_commits));
}

void Coordinator::ResolverLoop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      resolver_cv_.wait_for(lock, milliseconds(options_.resolve_interval_ms),
                            [&] { return stopping_; });
      if (stopping_) return;
    }
    // Resolving needs the id's lock (lost with its connection: taken again here).
    if (Status locked = LockId(); !locked.ok()) {
      ready_ = false;
      LOG_WARNING("txn resolver: not resolving: {}", locked.message());
      continue;
    }
    auto actions = Recover(false);
    ready_ = actions.ok();
    if (!actions.ok()) {
      LOG_WARNING("txn resolver: {}", actions.status().message());
      continue;
    }
    for (const RecoveryAction& a : *actions) {
      if (a.action == "mark done") continue;  // routine
      LOG_INFO("txn resolver: {} {} {} ({})", a.action, a.participant, a.gid, a.why);
    }
  }
}

Outcome Coordinator::LookupOn(pg::Connection* log, const std::string& txn_id,
                              const std::string& connect_error) {
  if (!log) return {503, ErrorJson("decision log: unavailable: " + connect_error)};
  auto o = ReadOutcome(log, txn_id, Clock::now() + kStepTimeout);
  if (!o.ok()) return {503, ErrorJson("decision log: unavailable: " + o.status().message())};
  if (!o->has_value()) {
    return {404, "{\"error\":\"no decision logged for this transaction: it did not commit\"}"};
  }
  const LoggedOutcome& l = **o;
  std::string state = l.state == "done" || l.state == "commit" ? "committed"
                      : l.state == "abort"                     ? "aborted"
                                                               : "in_progress";
  return {200, "{\"txn_id\":\"" + l.txn_id + "\",\"state\":\"" + state +
                   "\",\"answer\":" + (l.result.empty() ? "null" : l.result) + "}"};
}

}  // namespace dais::txn
