#include "txn/decision_log.h"

#include <algorithm>

namespace dais::txn {

namespace {

StatusOr<pg::Result> RunOne(pg::Connection* c, pg::Statement s, pg::Deadline deadline) {
  std::string what = s.sql.substr(0, 40);
  ASSIGN_OR_RETURN(auto results, c->Run({std::move(s)}, deadline));
  if (!results[0].ok) return Unavailable("decision log: " + what + ": " + pg::Describe(results[0]));
  return std::move(results[0]);
}

LoggedOutcome Row(const std::vector<std::optional<std::string>>& r) {
  LoggedOutcome o;
  o.txn_id = r[0].value_or("");
  o.state = r[1].value_or("");
  o.http_status = r[2] ? std::stoi(*r[2]) : 0;
  o.result = r[3].value_or("");
  return o;
}

}  // namespace

std::string GlobalId(const std::string& coordinator, const std::string& txn_id) {
  return "dais:" + coordinator + ":" + txn_id;
}

std::string ParticipantGid(const std::string& global_id, const std::string& participant) {
  return global_id + "@" + participant;
}

std::string TxnIdOfGid(const std::string& gid, const std::string& prefix,
                       const std::string& participant) {
  std::string id = gid.substr(std::min(prefix.size(), gid.size()));
  const std::string suffix = "@" + participant;
  if (id.size() > suffix.size() && id.ends_with(suffix)) id.resize(id.size() - suffix.size());
  return id;
}

Status InitDecisionLog(pg::Connection* log, pg::Deadline deadline) {
  RETURN_IF_ERROR(
      log->Exec("CREATE TABLE IF NOT EXISTS dais_txn_log ("
                " txn_id text PRIMARY KEY, coordinator text NOT NULL, type text NOT NULL,"
                " idempotency_key text UNIQUE,"
                " state text NOT NULL CHECK (state IN ('started', 'commit', 'abort', 'done')),"
                " http_status int, result text,"
                " created_at timestamptz NOT NULL DEFAULT now(), decided_at timestamptz)",
                deadline)
          .status());
  return log
      ->Exec(
          "CREATE INDEX IF NOT EXISTS dais_txn_log_open ON dais_txn_log (coordinator, state)"
          " WHERE state IN ('started', 'commit')",
          deadline)
      .status();
}

Status InitOutbox(pg::Connection* participant, pg::Deadline deadline) {
  ASSIGN_OR_RETURN(auto r, participant->Run({{"CREATE TABLE IF NOT EXISTS dais_outbox ("
                                              " id bigserial PRIMARY KEY, stream text NOT NULL,"
                                              " txn_id text NOT NULL, payload text NOT NULL,"
                                              " created_at timestamptz NOT NULL DEFAULT now(),"
                                              " traceparent text)",
                                              {}},
                                             {"SELECT 1 FROM information_schema.columns"
                                              " WHERE table_schema = current_schema()"
                                              " AND table_name = 'dais_outbox'"
                                              " AND column_name = 'traceparent'",
                                              {}}},
                                            deadline));
  for (const pg::Result& one : r) {
    if (!one.ok) return Unavailable("create the outbox: " + pg::Describe(one));
  }
  if (!r[1].rows.empty()) return OkStatus();
  // An outbox made before traceparent existed gains the column. The ALTER needs the table to
  // itself, which a prepared transaction holding outbox rows prevents until it is resolved:
  // bounded, and the refusal says what to do.
  ASSIGN_OR_RETURN(auto a,
                   participant->Run({{"BEGIN", {}},
                                     {"SET LOCAL lock_timeout = '2s'", {}},
                                     {"ALTER TABLE dais_outbox ADD COLUMN traceparent text", {}},
                                     {"COMMIT", {}}},
                                    deadline));
  for (const pg::Result& one : a) {
    if (!one.ok) {
      (void)participant->Exec("ROLLBACK", deadline);
      return Unavailable("add the traceparent column to dais_outbox: " + pg::Describe(one) +
                         " (prepared transactions of an older version hold the table: run "
                         "`dais txn recover`, then start again)");
    }
  }
  return OkStatus();
}

StatusOr<std::optional<LoggedOutcome>> ClaimKey(pg::Connection* log, const std::string& txn_id,
                                                const std::string& coordinator,
                                                const std::string& type, const std::string& key,
                                                pg::Deadline deadline) {
  const std::string scoped = type + ":" + key;
  ASSIGN_OR_RETURN(pg::Result claimed,
                   RunOne(log,
                          {"INSERT INTO dais_txn_log (txn_id, coordinator, type, idempotency_key,"
                           " state) VALUES ($1, $2, $3, $4, 'started')"
                           " ON CONFLICT (idempotency_key) DO NOTHING RETURNING txn_id",
                           {txn_id, coordinator, type, scoped}},
                          deadline));
  if (claimed.affected == 1) return std::optional<LoggedOutcome>();
  ASSIGN_OR_RETURN(pg::Result held,
                   RunOne(log,
                          {"SELECT txn_id, state, http_status, result FROM dais_txn_log"
                           " WHERE idempotency_key = $1",
                           {scoped}},
                          deadline));
  if (held.rows.empty()) return Unavailable("decision log: idempotency key vanished; retry");
  LoggedOutcome o = Row(held.rows[0]);
  // Claimed by this very transaction (a retry whose first INSERT landed but whose answer was
  // lost with the connection): it is ours.
  if (o.txn_id == txn_id && o.state == "started") return std::optional<LoggedOutcome>();
  return std::optional<LoggedOutcome>(std::move(o));
}

StatusOr<std::string> WriteDecision(pg::Connection* log, const std::string& txn_id,
                                    const std::string& coordinator, const std::string& type,
                                    const std::string& state, int http_status,
                                    const std::string& result, pg::Deadline deadline) {
  ASSIGN_OR_RETURN(
      pg::Result r,
      RunOne(log,
             {"INSERT INTO dais_txn_log (txn_id, coordinator, type, state, http_status, result,"
              " decided_at) VALUES ($1, $2, $3, $4, $5, $6, now())"
              " ON CONFLICT (txn_id) DO UPDATE SET state = EXCLUDED.state,"
              " http_status = EXCLUDED.http_status, result = EXCLUDED.result, decided_at = now()"
              " WHERE dais_txn_log.state = 'started' RETURNING state",
              {txn_id, coordinator, type, state, std::to_string(http_status), result}},
             deadline));
  if (r.affected == 1) return state;
  ASSIGN_OR_RETURN(
      pg::Result held,
      RunOne(log, {"SELECT state FROM dais_txn_log WHERE txn_id = $1", {txn_id}}, deadline));
  if (held.rows.empty()) return Unavailable("decision log: row of " + txn_id + " vanished");
  return held.rows[0][0].value_or("");
}

StatusOr<bool> TryLockCoordinatorId(pg::Connection* log, const std::string& coordinator,
                                    pg::Deadline deadline) {
  ASSIGN_OR_RETURN(
      pg::Result r,
      RunOne(log, {"SELECT pg_try_advisory_lock(hashtext('dais-txn:' || $1))", {coordinator}},
             deadline));
  return !r.rows.empty() && r.rows[0][0].value_or("") == "t";
}

StatusOr<std::optional<LoggedOutcome>> ReadOutcome(pg::Connection* log, const std::string& txn_id,
                                                   pg::Deadline deadline) {
  ASSIGN_OR_RETURN(pg::Result r,
                   RunOne(log,
                          {"SELECT txn_id, state, http_status, result FROM dais_txn_log"
                           " WHERE txn_id = $1",
                           {txn_id}},
                          deadline));
  if (r.rows.empty()) return std::optional<LoggedOutcome>();
  return std::optional<LoggedOutcome>(Row(r.rows[0]));
}

Status MarkDone(pg::Connection* log, const std::vector<std::string>& txn_ids,
                pg::Deadline deadline) {
  if (txn_ids.empty()) return OkStatus();
  std::string array = "{";
  for (size_t i = 0; i < txn_ids.size(); ++i) array += (i ? "," : "") + txn_ids[i];
  array += "}";
  auto r = log->Run({{"BEGIN", {}},
                     {"SET LOCAL synchronous_commit = off", {}},
                     {"UPDATE dais_txn_log SET state = 'done' WHERE txn_id = ANY($1::text[])"
                      " AND state = 'commit'",
                      {array}},
                     {"COMMIT", {}}},
                    deadline);
  if (!r.ok()) return r.status();
  for (const pg::Result& x : *r) {
    if (!x.ok) {
      (void)log->Exec("ROLLBACK", deadline);  // leave the connection idle for the next pass
      return Unavailable("decision log: mark done: " + pg::Describe(x));
    }
  }
  return OkStatus();
}

}  // namespace dais::txn
