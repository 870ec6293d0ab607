// A small PostgreSQL client on libpq for the transaction coordinator: non-blocking connections
// with deadlines, statements sent as one pipeline (libpq pipeline mode: a whole branch, or a
// PREPARE TRANSACTION, costs one round trip), and several connections driven at once from one
// thread (the participants of a transaction work in parallel). A connection whose batch missed
// its deadline or lost its socket is broken: its owner discards it (the server rolls an open
// transaction back when it sees the socket closed).
//
// Parameters travel in text form; PostgreSQL casts them to the column types.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dais/status.h"

struct pg_conn;

namespace dais::txn::pg {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

struct Statement {
  std::string sql;                                 // $1, $2, ... placeholders
  std::vector<std::optional<std::string>> params;  // nullopt: NULL
};

struct Result {
  bool ok = false;
  std::string sqlstate;  // e.g. "23514" (check_violation); empty when ok
  std::string message;   // PostgreSQL's primary message when !ok
  int64_t affected = 0;  // rows inserted / updated / deleted / returned
  std::vector<std::vector<std::optional<std::string>>> rows;
};

class Connection {
 public:
  // Connects (non-blocking: a server that accepts but never answers costs at most the deadline).
  // Unavailable naming the server's refusal, DeadlineExceeded past the deadline.
  static StatusOr<std::unique_ptr<Connection>> Connect(const std::string& conninfo,
                                                       Deadline deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `statements` as one pipeline and returns one Result per statement. A failed statement
  // fails the rest of the pipeline ("aborted"); an open transaction (BEGIN without COMMIT) stays
  // open. The Status is an error only when the connection broke or the deadline passed; then
  // the connection is broken().
  StatusOr<std::vector<Result>> Run(std::vector<Statement> statements, Deadline deadline);
  // One statement without parameters; a failed statement is an Internal error naming it.
  StatusOr<Result> Exec(const std::string& sql, Deadline deadline);

  bool broken() const { return broken_; }
  const std::string& conninfo() const { return conninfo_; }

 private:
  friend class Batch;
  friend Connection* EnsureConnected(std::unique_ptr<Connection>*, const std::string&, Deadline,
                                     std::string*);
  Connection(pg_conn* conn, std::string conninfo) : conn_(conn), conninfo_(std::move(conninfo)) {}
  // False when anything arrived while the connection sat idle (a restart: PostgreSQL sends each
  // session a FATAL and closes it; a killed server's sessions just close) or, after
  // kIdleCheckAfter unused, when it does not answer a SELECT 1 at once.
  bool StillUsable(Deadline deadline);
  pg_conn* conn_;
  std::string conninfo_;
  bool broken_ = false;
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
};

// An idle connection unused this long is checked with a round trip before it is used again (a
// peer that vanished without closing the socket shows only that way).
inline constexpr std::chrono::seconds kIdleCheckAfter{30};

// The connection in *slot, (re)connected when missing, broken, or found closed by the server on
// checkout (StillUsable: a database restart costs no statement); null (and *error set) when
// connecting fails.
Connection* EnsureConnected(std::unique_ptr<Connection>* slot, const std::string& conninfo,
                            Deadline deadline, std::string* error);

// One connection's pipeline inside RunParallel.
struct Work {
  Connection* connection = nullptr;
  std::vector<Statement> statements;
  StatusOr<std::vector<Result>> results = Unavailable("not run");
};

// Sends every work's statements, then waits for all answers on all sockets at once, up to the
// deadline. Each work's `results` is filled as Connection::Run would.
void RunParallel(std::vector<Work*> works, Deadline deadline);

// Quotes a string literal for SQL (for statements that take no parameters, e.g. COMMIT
// PREPARED 'gid').
std::string Literal(const std::string& text);

// The primary message of a failed result as "SQLSTATE 23514: new row ... violates check ...".
std::string Describe(const Result& result);

}  // namespace dais::txn::pg
