#include "txn/coordinator.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <map>
#include <optional>

#include "common/logging.h"
#include "dais/clock.h"
#include "txn/decision_log.h"
#include "txn/txn_metrics.h"

namespace dais::txn {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t kMaxQueue = 4096;
constexpr milliseconds kLogTimeout{2000};
constexpr milliseconds kCommitTimeout{5000};
constexpr milliseconds kConnectTimeout{1000};

struct GateState {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<GateResult> result;
};

}  // namespace

std::string ErrorJson(const std::string& message) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("error");
  w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return sb.GetString();
}

struct Coordinator::Worker {
  std::map<std::string, std::unique_ptr<pg::Connection>> conns;  // by participant
  std::unique_ptr<pg::Connection> log;
};

struct Coordinator::Txn {
  const TypeSpec* type = nullptr;
  Params params;
  std::string id, gid, key;
  Clock::time_point start, deadline;
  std::vector<std::string> participants;  // in order of first appearance among the branches
  std::vector<pg::Connection*> conns;     // per participant; null: unavailable
  std::vector<bool> prepared;
  std::shared_ptr<GateState> gate;
  std::shared_ptr<const ServerTrace> trace;
  double score = -1;
  bool review = false;
  std::function<void(Outcome)> done;
  // The failure, once one is known.
  int fail_status = 0;
  std::string fail_reason, fail_message;
  void Fail(int status, std::string reason, std::string message) {
    if (fail_status != 0) return;
    fail_status = status;
    fail_reason = std::move(reason);
    fail_message = std::move(message);
  }
};

namespace {

std::string OutcomeJson(const std::string& txn_id, const std::string& type,
                        const std::string& outcome, const std::string& reason,
                        const std::string& message, double score, bool review, double duration_ms) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("txn_id");
  w.String(txn_id.c_str());
  w.Key("type");
  w.String(type.c_str());
  w.Key("outcome");
  w.String(outcome.c_str());
  if (!reason.empty()) {
    w.Key("reason");
    w.String(reason.c_str());
    w.Key("error");
    w.String(message.c_str());
  }
  if (score >= 0 || review) {
    w.Key("gate");
    w.StartObject();
    if (score >= 0) {
      w.Key("score");
      w.Double(score);
    }
    w.Key("review");
    w.Bool(review);
    w.EndObject();
  }
  w.Key("duration_ms");
  w.Double(duration_ms);
  w.EndObject();
  return sb.GetString();
}

double MillisSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

Coordinator::Coordinator(TxnSpecPtr spec, CoordinatorOptions options, Gate* gate)
    : spec_(std::move(spec)), options_(std::move(options)), gate_(gate) {}

Coordinator::~Coordinator() { Stop(); }

Status Coordinator::Start() {
  if (options_.id.empty() || options_.id.size() > 64 ||
      options_.id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789_-") != std::string::npos) {
    return InvalidArgument("--id '" + options_.id + "': 1-64 of [A-Za-z0-9_-]");
  }
  const auto deadline = Clock::now() + milliseconds(5000);
  auto log = pg::Connection::Connect(spec_->log, deadline);
  if (!log.ok()) return Unavailable("decision log: " + log.status().message());
  RETURN_IF_ERROR(InitDecisionLog(log->get(), deadline));
  resolver_log_ = std::move(*log);
  // A predecessor killed a moment ago may still hold the id's lock until its server notices.
  for (int tries = 0;; ++tries) {
    Status locked = LockId();
    if (locked.ok()) break;
    if (locked.code() != StatusCode::kFailedPrecondition || tries == 100) return locked;
    if (tries == 0) LOG_INFO("txn: waiting for the lock of coordinator id {}", options_.id);
    std::this_thread::sleep_for(milliseconds(100));
  }
  for (const auto& [name, info] : spec_->participants) {
    auto c = pg::Connection::Connect(info, deadline);
    if (!c.ok()) {
      LOG_WARNING(
          "txn: participant {} is not reachable ({}); its prepared transactions are "
          "resolved when it returns",
          name, c.status().message());
      resolver_participants_.emplace_back();
      continue;
    }
    RETURN_IF_ERROR(InitOutbox(c->get(), deadline));
    resolver_participants_.push_back(std::move(*c));
  }
  auto actions = Recover(false);
  if (!actions.ok()) return actions.status();
  for (const RecoveryAction& a : *actions) {
    LOG_INFO("txn recovery: {} {} {} ({})", a.action, a.participant, a.gid, a.why);
  }
  LOG_INFO("txn recovery: {} action(s)", actions->size());
  // Every worker connects before the first transaction (opening connections inside one would
  // eat its prepare budget); Start returns once they did, or failed (a participant that is down
  // is connected to when needed).
  // Shared with the threads: one may still notify after Start returned.
  auto connecting = std::make_shared<std::atomic<int>>(options_.workers);
  for (int i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    threads_.emplace_back([this, w = workers_.back().get(), connecting] {
      std::string error;
      const auto until = Clock::now() + milliseconds(5000);
      pg::EnsureConnected(&w->log, spec_->log, until, &error);
      for (const auto& [name, info] : spec_->participants) {
        pg::EnsureConnected(&w->conns[name], info, until, &error);
      }
      connecting->fetch_sub(1);
      connecting->notify_all();
      WorkerLoop(w);
    });
  }
  for (int left = connecting->load(); left > 0; left = connecting->load()) connecting->wait(left);
  if (gate_ && !gate_->Connect(5000)) {
    LOG_WARNING(
        "txn: the model server of the gates is not reachable yet; gates apply their "
        "on_error policy until it is");
  }
  ready_ = true;
  resolver_ = std::thread([this] { ResolverLoop(); });
  return OkStatus();
}

void Coordinator::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  resolver_cv_.notify_all();
  for (auto& t : threads_) t.join();
  if (resolver_.joinable()) resolver_.join();
  for (Job& j : queue_) j.done({503, ErrorJson("the coordinator is shutting down")});
  queue_.clear();
}

void Coordinator::Submit(std::string type, std::string body, std::string key, CallTrace trace,
                         std::function<void(Outcome)> done) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && queue_.size() < kMaxQueue) {
      queue_.push_back({std::move(type), std::move(body), std::move(key), std::move(done), "",
                        std::move(trace)});
      cv_.notify_one();
      return;
    }
  }
  done({503, ErrorJson("too many transactions queued; retry later")});
}

void Coordinator::Lookup(std::string txn_id, std::function<void(Outcome)> done) {
  if (txn_id.empty()) {
    done({404, ErrorJson("no transaction id")});
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && queue_.size() < kMaxQueue) {
      queue_.push_back({"", "", "", std::move(done), std::move(txn_id), {}});
      cv_.notify_one();
      return;
    }
  }
  done({503, ErrorJson("too many requests queued; retry later")});
}

void Coordinator::TraceAnswer(Job* job, const std::shared_ptr<const ServerTrace>& trace,
                              std::shared_ptr<std::string> txn_id) {
  job->done = [this, trace, txn_id = std::move(txn_id), type = job->type,
               done = std::move(job->done)](Outcome o) {
    o.request_id = trace->request_id;
    o.traceparent = trace->Outgoing();
    if (options_.span_sink && trace->trace.sampled()) {
      Span span;
      span.trace_id = trace->trace.trace_id;
      span.span_id = trace->span_id;
      span.parent_id = trace->trace.parent_id;
      span.name = "txn " + type;
      span.start_unix_ns = trace->start_unix_ns;
      span.end_unix_ns = UnixNs();
      span.error = o.http_status >= 500;
      span.string_attributes = {{"dais.txn.type", type},
                                {"dais.txn.id", *txn_id},
                                {"dais.request_id", trace->request_id}};
      span.int_attributes = {{"http.response.status_code", o.http_status}};
      options_.span_sink(std::move(span));
    }
    done(std::move(o));
  };
}

void Coordinator::WorkerLoop(Worker* w) {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!job.lookup.empty()) {  // a read of the log, off the I/O threads
      std::string error;
      pg::Connection* log =
          pg::EnsureConnected(&w->log, spec_->log, Clock::now() + kConnectTimeout, &error);
      job.done(LookupOn(log, job.lookup, error));
      continue;
    }
    Outcome o = Execute(w, job);
    if (job.done) job.done(std::move(o));  // not yet answered (refused, or failed early)
  }
}

Outcome Coordinator::Execute(Worker* w, Job& job) {
  auto& m = TxnMetrics::Get();
  auto trace = std::make_shared<const ServerTrace>(
      BeginServerTrace(job.trace.traceparent, job.trace.request_id,
                       options_.span_sink ? options_.trace_sample_rate : 0));
  auto txn_id = std::make_shared<std::string>();
  TraceAnswer(&job, trace, txn_id);
  const TypeSpec* type = spec_->Find(job.type);
  if (!type) {
    std::string known;
    for (const auto& [n, _] : spec_->types) known += (known.empty() ? "" : ", ") + n;
    m.transactions.Get({"", "bad_request"}).Increment();
    return {400, ErrorJson("unknown transaction type '" + job.type + "' (known: " + known + ")")};
  }
  auto params = ParseParams(*type, job.body);
  // A NUL cannot reach the log (PostgreSQL text has none): "K\0A" and "K\0B" would share K's
  // answer (issue 32). Refused rather than cut.
  const bool nul = job.key.find('\0') != std::string::npos;
  if (!params.ok() || job.key.size() > 256 || nul) {
    m.transactions.Get({type->name, "bad_request"}).Increment();
    return {400, ErrorJson(!params.ok() ? params.status().message()
                           : nul        ? "idempotency key: contains a NUL byte"
                                        : "Idempotency-Key: longer than 256 bytes")};
  }
  Txn t;
  t.type = type;
  t.params = std::move(*params);
  t.key = job.key;
  t.start = Clock::now();
  t.deadline = t.start + milliseconds(spec_->prepare_timeout_ms);
  t.id = options_.id + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()) +
         "-" + std::to_string(sequence_.fetch_add(1));
  t.gid = GlobalId(options_.id, t.id);
  t.trace = trace;
  *txn_id = t.id;
  {
    std::lock_guard lock(mu_);
    in_flight_.insert(t.id);
  }
  struct Leave {
    Coordinator* c;
    const std::string& id;
    ~Leave() {
      std::lock_guard lock(c->mu_);
      c->in_flight_.erase(id);
    }
  } leave{this, t.id};
  std::string error;
  pg::Connection* log = pg::EnsureConnected(&w->log, spec_->log, t.start + kConnectTimeout, &error);
  if (!log) return Refuse(w, t, 503, "log_unavailable", "decision log: " + error);
  if (!t.key.empty()) {
    auto held = ClaimKey(log, t.id, options_.id, type->name, t.key, t.start + kLogTimeout);
    if (!held.ok() && held.status().code() == StatusCode::kUnavailable) {
      // The log's connection broke (a restart since the checkout): once more on a new one. The
      // claim is idempotent for this transaction id (decision_log.h).
      log = pg::EnsureConnected(&w->log, spec_->log, t.start + kConnectTimeout, &error);
      if (!log) return Refuse(w, t, 503, "log_unavailable", "decision log: " + error);
      held = ClaimKey(log, t.id, options_.id, type->name, t.key, t.start + kLogTimeout);
    }
    if (!held.ok()) return Refuse(w, t, 503, "log_unavailable", held.status().message());
    if (held->has_value()) {
      const LoggedOutcome& o = **held;
      if (o.state == "started") {
        return {409, ErrorJson("transaction " + o.txn_id +
                               " with this Idempotency-Key is still in progress; retry later")};
      }
      return {o.http_status, o.result};
    }
  }
  t.done = std::move(job.done);
  Outcome o = RunProtocol(w, t);
  job.done = std::move(t.done);  // empty when RunProtocol already answered
  return o;
}

Outcome Coordinator::RunProtocol(Worker* w, Txn& t) {
  auto& m = TxnMetrics::Get();
  if (t.type->gate && gate_) {
    t.gate = std::make_shared<GateState>();
    gate_->Score(*t.type->gate, t.params, {t.trace->Outgoing(), t.trace->request_id},
                 [g = t.gate](GateResult r) {
                   std::lock_guard lock(g->mu);
                   g->result = std::move(r);
                   g->cv.notify_all();
                 });
  }
  bool ok = RunBranches(w, t);
  if (ok) CrashPoint("after_branches");
  if (t.gate && ok) {  // failed branches need no score: roll back at once
    std::unique_lock lock(t.gate->mu);
    t.gate->cv.wait_until(lock, t.deadline, [&] { return t.gate->result.has_value(); });
    GateResult r = t.gate->result.value_or(
        GateResult{GateResult::kError, 0, "no answer within the prepare budget"});
    lock.unlock();
    const GateSpec& g = *t.type->gate;
    if (r.kind != GateResult::kError) t.score = r.score;
    if (r.kind == GateResult::kRefuse) {
      m.gate.Get({t.type->name, "refuse"}).Increment();
      t.Fail(409, "gate_refused", r.message);
      ok = false;
    } else if (r.kind == GateResult::kError && g.on_error == GatePolicy::kRefuse) {
      m.gate.Get({t.type->name, "error_refused"}).Increment();
      t.Fail(503, "gate_unavailable", "gate: " + r.message);
      ok = false;
    } else if (r.kind == GateResult::kError) {
      m.gate.Get({t.type->name, "error_allowed"}).Increment();
      t.review = true;
      LOG_WARNING("txn {}: gate unavailable ({}); allowed by policy, marked for review", t.id,
                  r.message);
    } else {
      m.gate.Get({t.type->name, "pass"}).Increment();
    }
  }
  if (!ok) {
    RollBack(w, t, false);
    return Refuse(w, t, t.fail_status, t.fail_reason, t.fail_message);
  }
  if (!Prepare(w, t)) {
    RollBack(w, t, true);
    return Refuse(w, t, t.fail_status, t.fail_reason, t.fail_message);
  }
  CrashPoint("after_prepare");
  const std::string body =
      OutcomeJson(t.id, t.type->name, "committed", "", "", t.score, t.review, MillisSince(t.start));
  auto logged = WriteDecision(w->log.get(), t.id, options_.id, t.type->name, "commit", 200, body,
                              Clock::now() + kLogTimeout);
  if (!logged.ok() && logged.status().code() == StatusCode::kUnavailable) {
    // The write is idempotent (a decision already there is returned), so a broken connection
    // is retried once on a new one before the transaction is left in doubt.
    std::string error;
    if (pg::Connection* log =
            pg::EnsureConnected(&w->log, spec_->log, Clock::now() + kConnectTimeout, &error)) {
      logged = WriteDecision(log, t.id, options_.id, t.type->name, "commit", 200, body,
                             Clock::now() + kLogTimeout);
    }
  }
  if (logged.ok() && *logged != "commit") {
    // Another process decided abort first (only possible when a second process uses this
    // coordinator id, which the id lock prevents): follow the log.
    RollBack(w, t, true);
    return Refuse(w, t, 503, "log_unavailable", "the decision log holds an abort for " + t.id);
  }
  if (!logged.ok()) {
    // Whether the decision reached the log is unknown: the resolver settles it from the log.
    m.transactions.Get({t.type->name, "in_doubt"}).Increment();
    LOG_WARNING("txn {}: decision log write failed ({}); left to recovery", t.id,
                logged.status().message());
    return {503, OutcomeJson(t.id, t.type->name, "in_doubt", "log_unavailable",
                             "the decision could not be confirmed: " + logged.status().message() +
                                 "; GET /v1/txn/" + t.id + " tells the outcome",
                             t.score, t.review, MillisSince(t.start))};
  }
  CrashPoint("after_decision");
  m.transactions.Get({t.type->name, "committed"}).Increment();
  m.duration.Get({t.type->name}).Observe(MillisSince(t.start) / 1000.0);
  auto done = std::move(t.done);
  t.done = nullptr;
  done({200, body});
  Commit(w, t);
  return {};
}

bool Coordinator::RunBranches(Worker* w, Txn& t) {
  std::vector<pg::Work> works;
  std::vector<std::vector<size_t>> owners;  // per work: the branch of each statement (or npos)
  for (const BranchSpec& b : t.type->branches) {
    size_t p = 0;
    while (p < t.participants.size() && t.participants[p] != b.participant) ++p;
    if (p == t.participants.size()) {
      t.participants.push_back(b.participant);
      works.push_back({});
      works.back().statements.push_back({"BEGIN", {}});
    }
    for (const StatementSpec& s : b.statements) {
      pg::Statement st{s.sql, {}};
      for (const std::string& name : s.params) st.params.emplace_back(t.params.at(name));
      works[p].statements.push_back(std::move(st));
    }
    for (const EventSpec& e : b.events) {
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> jw(sb);
      jw.StartObject();
      for (const auto& [k, ref] : e.fields) {
        jw.Key(k.c_str());
        std::string v = Resolve(ref, t.params);
        jw.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
      }
      jw.EndObject();
      works[p].statements.push_back(
          {"INSERT INTO dais_outbox (stream, txn_id, payload, traceparent)"
           " VALUES ($1, $2, $3, $4)",
           {e.stream, t.id, std::string(sb.GetString()), t.trace->Outgoing()}});
    }
  }
  t.conns.assign(t.participants.size(), nullptr);
  t.prepared.assign(t.participants.size(), false);
  std::vector<pg::Work*> run;
  for (size_t p = 0; p < t.participants.size(); ++p) {
    std::string error;
    const std::string& name = t.participants[p];
    t.conns[p] =
        pg::EnsureConnected(&w->conns[name], spec_->participants.at(name), t.deadline, &error);
    if (!t.conns[p]) {
      t.Fail(error.find("too long") != std::string::npos ? 504 : 503,
             error.find("too long") != std::string::npos ? "prepare_timeout"
                                                         : "participant_unavailable",
             "participant " + name + ": " + error);
      return false;
    }
    works[p].connection = t.conns[p];
    run.push_back(&works[p]);
  }
  pg::RunParallel(run, t.deadline);
  RerunBrokenBranches(w, t, &works);
  for (size_t p = 0; p < works.size(); ++p) {
    const std::string& name = t.participants[p];
    if (!works[p].results.ok()) {
      const Status& st = works[p].results.status();
      bool late = st.code() == StatusCode::kDeadlineExceeded;
      t.Fail(late ? 504 : 503, late ? "prepare_timeout" : "participant_unavailable",
             "participant " + name +
                 (late ? " did not answer within the prepare budget (" +
                             std::to_string(spec_->prepare_timeout_ms) + " ms)"
                       : ": " + st.message()));
      continue;
    }
    // Map results back to the declared statements (BEGIN first, outbox inserts last).
    size_t i = 1;
    for (const BranchSpec& b : t.type->branches) {
      if (b.participant != name) continue;
      for (const StatementSpec& s : b.statements) {
        const pg::Result& r = (*works[p].results)[i++];
        if (!r.ok) {
          t.Fail(409, "branch_failed", "branch " + name + ": " + pg::Describe(r));
        } else if (s.expect_rows >= 0 && r.affected != s.expect_rows) {
          t.Fail(409, "branch_failed", "branch " + name + ": " + s.error);
        }
      }
      for (size_t e = 0; e < b.events.size(); ++e) {
        const pg::Result& r = (*works[p].results)[i++];
        if (!r.ok) t.Fail(409, "branch_failed", "branch " + name + " outbox: " + pg::Describe(r));
      }
    }
  }
  return t.fail_status == 0;
}

// A connection that broke under the branch (a participant restarted between the checkout and
// the pipeline): nothing of this transaction survives there (it was neither committed nor
// prepared), so the branch runs again once on a fresh connection while time is left.
void Coordinator::RerunBrokenBranches(Worker* w, Txn& t, std::vector<pg::Work>* works) {
  std::vector<pg::Work*> again;
  for (size_t p = 0; p < works->size(); ++p) {
    if ((*works)[p].results.ok() ||
        (*works)[p].results.status().code() != StatusCode::kUnavailable ||
        Clock::now() >= t.deadline) {
      continue;
    }
    const std::string& name = t.participants[p];
    std::string error;
    t.conns[p] =
        pg::EnsureConnected(&w->conns[name], spec_->participants.at(name), t.deadline, &error);
    if (!t.conns[p]) continue;  // refused below with the first failure
    LOG_INFO("txn {}: participant {}'s connection broke ({}); its branch runs again on a new one",
             t.id, name, (*works)[p].results.status().message());
    (*works)[p].connection = t.conns[p];
    again.push_back(&(*works)[p]);
  }
  if (!again.empty()) pg::RunParallel(again, t.deadline);
}

bool Coordinator::Prepare(Worker*, Txn& t) {
  std::vector<pg::Work> works(t.participants.size());
  std::vector<pg::Work*> run;
  for (size_t p = 0; p < works.size(); ++p) {
    works[p].connection = t.conns[p];
    works[p].statements.push_back(
        {"PREPARE TRANSACTION " + pg::Literal(ParticipantGid(t.gid, t.participants[p])), {}});
    run.push_back(&works[p]);
  }
  pg::RunParallel(run, t.deadline);
  for (size_t p = 0; p < works.size(); ++p) {
    const std::string& name = t.participants[p];
    if (!works[p].results.ok()) {
      bool late = works[p].results.status().code() == StatusCode::kDeadlineExceeded;
      t.Fail(late ? 504 : 503, late ? "prepare_timeout" : "participant_unavailable",
             "participant " + name +
                 (late ? " did not prepare within the prepare budget (" +
                             std::to_string(spec_->prepare_timeout_ms) + " ms)"
                       : ": " + works[p].results.status().message()));
    } else if (!(*works[p].results)[0].ok) {
      t.Fail(
          409, "branch_failed",
          "participant " + name + " refused to prepare: " + pg::Describe((*works[p].results)[0]));
    } else {
      t.prepared[p] = true;
    }
  }
  return t.fail_status == 0;
}

void Coordinator::RollBack(Worker*, Txn& t, bool prepared) {
  std::vector<pg::Work> works(t.participants.size());
  std::vector<pg::Work*> run;
  for (size_t p = 0; p < t.conns.size(); ++p) {
    if (!t.conns[p] || t.conns[p]->broken()) continue;  // the server rolls back on close
    works[p].connection = t.conns[p];
    works[p].statements.push_back(
        {prepared && t.prepared[p]
             ? "ROLLBACK PREPARED " + pg::Literal(ParticipantGid(t.gid, t.participants[p]))
             : "ROLLBACK",
         {}});
    run.push_back(&works[p]);
  }
  // A participant whose PREPARE may have run without us learning it keeps a prepared
  // transaction: the resolver rolls it back (no commit decision, no longer in flight).
  pg::RunParallel(run, Clock::now() + kCommitTimeout);
}

void Coordinator::Commit(Worker*, Txn& t) {
  std::vector<pg::Work> works(t.participants.size());
  std::vector<pg::Work*> run;
  for (size_t p = 0; p < t.conns.size(); ++p) {
    works[p].connection = t.conns[p];
    works[p].statements.push_back(
        {"COMMIT PREPARED " + pg::Literal(ParticipantGid(t.gid, t.participants[p])), {}});
    if (options_.crash_at == "during_commit" && p == 0) {
      pg::RunParallel({&works[0]}, Clock::now() + kCommitTimeout);
      CrashPoint("during_commit");
      continue;
    }
    run.push_back(&works[p]);
  }
  pg::RunParallel(run, Clock::now() + kCommitTimeout);
  bool everywhere = true;
  for (size_t p = 0; p < works.size(); ++p) {
    if (works[p].results.ok() && (*works[p].results)[0].ok) {
      if (on_commit_) on_commit_(t.participants[p]);
    } else {
      everywhere = false;
      LOG_WARNING("txn {}: COMMIT PREPARED on {} failed ({}); the resolver retries", t.id,
                  t.participants[p],
                  works[p].results.ok() ? pg::Describe((*works[p].results)[0])
                                        : works[p].results.status().message());
    }
  }
  // Marking the decision done is left to the resolver, which does it for all transactions
  // committed since its last pass in one statement (a log round trip less per transaction);
  // until then it knows from finished_ that this one is not in doubt.
  if (everywhere) {
    std::lock_guard lock(mu_);
    finished_.insert(t.id);
  }
}

Outcome Coordinator::Refuse(Worker* w, Txn& t, int status, const std::string& reason,
                            const std::string& message) {
  auto& m = TxnMetrics::Get();
  m.transactions.Get({t.type->name, "aborted"}).Increment();
  m.aborts.Get({t.type->name, reason}).Increment();
  m.duration.Get({t.type->name}).Observe(MillisSince(t.start) / 1000.0);
  std::string body = OutcomeJson(t.id, t.type->name, "aborted", reason, message, t.score, t.review,
                                 MillisSince(t.start));
  if (!t.key.empty() && w->log && !w->log->broken()) {
    // A retry with the same key gets this answer (presumed abort needs no log record otherwise).
    auto st = WriteDecision(w->log.get(), t.id, options_.id, t.type->name, "abort", status, body,
                            Clock::now() + kLogTimeout);
    if (!st.ok()) LOG_WARNING("txn {}: abort not logged: {}", t.id, st.status().message());
  }
  return {status, std::move(body)};
}

void Coordinator::CrashPoint(const char* step) {
  if (options_.crash_at != step || crashed_once_.exchange(true)) return;
  LOG_WARNING("txn: crash point {} reached: SIGKILL (fault injection, --crash-at)", step);
  // during_commit comes after the answer: give the I/O thread time to write it.
  if (std::string_view(step) == "during_commit") std::this_thread::sleep_for(milliseconds(200));
  ::raise(SIGKILL);
}

bool Coordinator::InFlight(const std::string& txn_id) {
  std::lock_guard lock(mu_);
  return in_flight_.count(txn_id) > 0;
}

}  // namespace dais::txn
