#include "txn/pg.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

namespace dais::txn::pg {

namespace {

int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

std::string ConnError(pg_conn* c) {
  std::string m = PQerrorMessage(c);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

Result ToResult(PGresult* r) {
  Result out;
  ExecStatusType st = PQresultStatus(r);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    out.ok = true;
    const char* tuples = PQcmdTuples(r);
    out.affected = (tuples && *tuples) ? std::stoll(tuples) : 0;
    int n = PQntuples(r), m = PQnfields(r);
    if (st == PGRES_TUPLES_OK) out.affected = n;
    out.rows.resize(n);
    for (int i = 0; i < n; ++i) {
      out.rows[i].reserve(m);
      for (int j = 0; j < m; ++j) {
        if (PQgetisnull(r, i, j)) {
          out.rows[i].emplace_back(std::nullopt);
        } else {
          out.rows[i].emplace_back(std::string(PQgetvalue(r, i, j), PQgetlength(r, i, j)));
        }
      }
    }
    return out;
  }
  if (st == PGRES_PIPELINE_ABORTED) {
    out.message = "not run: an earlier statement of the pipeline failed";
    return out;
  }
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  out.sqlstate = state ? state : "";
  out.message = primary ? primary : PQresultErrorMessage(r);
  return out;
}

}  // namespace

// Drives one connection's pipeline: Send, then Step whenever its socket is readable.
class Batch {
 public:
  explicit Batch(Work* w) : w_(w), c_(w->connection) {
    c_->last_used_ = std::chrono::steady_clock::now();
  }

  bool Send() {
    if (c_->broken_) return Fail("connection is broken");
    pg_conn* pc = c_->conn_;
    if (PQenterPipelineMode(pc) != 1) return Fail("cannot enter pipeline mode: " + ConnError(pc));
    for (const Statement& s : w_->statements) {
      std::vector<const char*> values;
      values.reserve(s.params.size());
      for (const auto& p : s.params) values.push_back(p ? p->c_str() : nullptr);
      if (PQsendQueryParams(pc, s.sql.c_str(), static_cast<int>(values.size()), nullptr,
                            values.data(), nullptr, nullptr, 0) != 1) {
        return Fail("send: " + ConnError(pc));
      }
    }
    if (PQpipelineSync(pc) != 1) return Fail("sync: " + ConnError(pc));
    results_.reserve(w_->statements.size());
    return true;
  }

  // Flushes and reads what is there. True when finished (results or failure set).
  bool Step() {
    if (done_) return true;
    pg_conn* pc = c_->conn_;
    int f = PQflush(pc);
    if (f < 0) return Fail("write: " + ConnError(pc));
    want_write_ = f == 1;
    if (PQconsumeInput(pc) != 1) return Fail("read: " + ConnError(pc));
    while (!PQisBusy(pc)) {
      PGresult* r = PQgetResult(pc);
      if (r == nullptr) {  // the end of one statement's results
        if (PQstatus(pc) == CONNECTION_BAD) return Fail("connection lost: " + ConnError(pc));
        got_current_ = false;
        continue;
      }
      ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        PQexitPipelineMode(pc);
        while (results_.size() < w_->statements.size()) results_.push_back(Result{});
        w_->results = std::move(results_);
        done_ = true;
        return true;
      }
      if (!got_current_) {
        results_.push_back(ToResult(r));
        got_current_ = true;
      }
      PQclear(r);
    }
    return false;
  }

  // A broken connection is shut down at once, not when its owner next replaces it: the server
  // must see the end of the socket and roll back what the connection holds (row locks of an open
  // transaction would otherwise block every later transaction on those rows).
  void Break() {
    c_->broken_ = true;
    if (int fd = PQsocket(c_->conn_); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  bool Fail(const std::string& why) {
    Break();
    w_->results = Unavailable("PostgreSQL (" + Host() + "): " + why);
    done_ = true;
    return false;
  }
  void Timeout() {
    Break();
    w_->results = DeadlineExceeded("PostgreSQL (" + Host() + ") did not answer in time");
    done_ = true;
  }
  std::string Host() const {
    const char* h = PQhost(c_->conn_);
    const char* p = PQport(c_->conn_);
    return std::string(h ? h : "?") + ":" + (p ? p : "?");
  }
  int fd() const { return PQsocket(c_->conn_); }
  bool done() const { return done_; }
  bool want_write() const { return want_write_; }

 private:
  Work* w_;
  Connection* c_;
  std::vector<Result> results_;
  bool got_current_ = false;
  bool done_ = false;
  bool want_write_ = true;
};

void RunParallel(std::vector<Work*> works, Deadline deadline) {
  std::vector<Batch> batches;
  batches.reserve(works.size());
  for (Work* w : works) {
    batches.emplace_back(w);
    if (batches.back().Send()) batches.back().Step();
  }
  std::vector<pollfd> fds;
  std::vector<Batch*> waiting;
  while (true) {
    fds.clear();
    waiting.clear();
    for (Batch& b : batches) {
      if (b.done()) continue;
      fds.push_back({b.fd(), static_cast<short>(POLLIN | (b.want_write() ? POLLOUT : 0)), 0});
      waiting.push_back(&b);
    }
    if (waiting.empty()) return;
    int left = MillisLeft(deadline);
    if (left == 0 && Clock::now() >= deadline) {
      for (Batch* b : waiting) b->Timeout();
      return;
    }
    int n = ::poll(fds.data(), fds.size(), std::max(1, left));
    if (n < 0 && errno != EINTR) {
      for (Batch* b : waiting) b->Fail("poll failed");
      return;
    }
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (fds[i].revents != 0) waiting[i]->Step();
    }
  }
}

StatusOr<std::unique_ptr<Connection>> Connection::Connect(const std::string& conninfo,
                                                          Deadline deadline) {
  pg_conn* c = PQconnectStart(conninfo.c_str());
  if (c == nullptr) return Internal("PostgreSQL: out of memory");
  auto fail = [&](Status s) {
    PQfinish(c);
    return s;
  };
  if (PQstatus(c) == CONNECTION_BAD) return fail(Unavailable("PostgreSQL: " + ConnError(c)));
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (st == PGRES_POLLING_FAILED) return fail(Unavailable("PostgreSQL: " + ConnError(c)));
    int left = MillisLeft(deadline);
    if (left == 0) return fail(DeadlineExceeded("PostgreSQL: connecting took too long"));
    pollfd p{PQsocket(c), static_cast<short>(st == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    int n = ::poll(&p, 1, left);
    if (n == 0) continue;
    if (n < 0 && errno != EINTR) return fail(Unavailable("PostgreSQL: poll failed"));
    st = PQconnectPoll(c);
  }
  if (PQsetnonblocking(c, 1) != 0) return fail(Internal("PostgreSQL: " + ConnError(c)));
  // NOTICEs ("relation ... already exists, skipping") are not errors: keep them off stderr.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<Connection>(new Connection(c, conninfo));
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::StillUsable(Deadline deadline) {
  const int fd = PQsocket(conn_);
  if (fd < 0 || PQstatus(conn_) != CONNECTION_OK) return false;
  // Idle, nothing should arrive: something readable is the server's goodbye (a FATAL then the
  // end of the stream: libpq reports neither until a query reads them) or, rarely, an unasked
  // NOTICE or parameter report. Either way a new connection is the safe choice.
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) return false;
  if (std::chrono::steady_clock::now() - last_used_ < kIdleCheckAfter) return true;
  const auto check = std::min(deadline, Clock::now() + std::chrono::seconds(1));
  return Exec("SELECT 1", check).ok();
}

StatusOr<std::vector<Result>> Connection::Run(std::vector<Statement> statements,
                                              Deadline deadline) {
  Work w{this, std::move(statements)};
  RunParallel({&w}, deadline);
  return std::move(w.results);
}

StatusOr<Result> Connection::Exec(const std::string& sql, Deadline deadline) {
  auto r = Run({{sql, {}}}, deadline);
  if (!r.ok()) return r.status();
  Result& one = (*r)[0];
  if (!one.ok) return Internal(sql.substr(0, 60) + ": " + Describe(one));
  return std::move(one);
}

Connection* EnsureConnected(std::unique_ptr<Connection>* slot, const std::string& conninfo,
                            Deadline deadline, std::string* error) {
  // A connection left inside a transaction (a failed pipeline nobody rolled back) is replaced:
  // the next user expects a clean session.
  if (*slot && !(*slot)->broken() && PQtransactionStatus((*slot)->conn_) == PQTRANS_IDLE &&
      (*slot)->StillUsable(deadline)) {
    return slot->get();
  }
  slot->reset();
  auto c = Connection::Connect(conninfo, deadline);
  if (!c.ok()) {
    *error = c.status().message();
    return nullptr;
  }
  *slot = std::move(*c);
  return slot->get();
}

std::string Literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string Describe(const Result& r) {
  if (r.ok) return "ok";
  return r.sqlstate.empty() ? r.message : "SQLSTATE " + r.sqlstate + ": " + r.message;
}

}  // namespace dais::txn::pg
