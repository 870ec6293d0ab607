// The coordinator's decision log: a table in its own PostgreSQL database (`log:` in the
// transactions file). A commit decision is a synchronously committed row written after every
// participant prepared and before the caller is answered; it is the only thing recovery trusts
// (presumed abort: a prepared transaction without a commit row is rolled back). Why a database and
// not a file: PostgreSQL already fsyncs and group-commits concurrent decisions, keeps them
// queryable for operators, and gives idempotency keys a unique index; docs/transactions.md.
//
//   dais_txn_log(txn_id PK, coordinator, type, idempotency_key UNIQUE, state, http_status,
//                result, created_at, decided_at)
//   state: started (keyed request in progress) | commit | abort | done (committed everywhere)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "txn/pg.h"

namespace dais::txn {

// Creates the log table (and index) if missing.
Status InitDecisionLog(pg::Connection* log, pg::Deadline deadline);
// Creates the outbox table on a participant if missing.
Status InitOutbox(pg::Connection* participant, pg::Deadline deadline);

struct LoggedOutcome {
  std::string txn_id;
  std::string state;
  int http_status = 0;
  std::string result;  // the JSON answer given
};

// A keyed request: claims the key (state "started"). nullopt when claimed now; otherwise the row
// that holds the key (its outcome if decided, state "started" if still in progress).
StatusOr<std::optional<LoggedOutcome>> ClaimKey(pg::Connection* log, const std::string& txn_id,
                                                const std::string& coordinator,
                                                const std::string& type, const std::string& key,
                                                pg::Deadline deadline);
// Writes a decision ("commit" or "abort") unless one is there already, durably, and returns the
// state the row holds afterwards: `state` when this write decided, else the decision found. The
// row is the one point of agreement between a worker and the resolver: the first decision
// written wins (a keyed row still "started" can be decided by either).
StatusOr<std::string> WriteDecision(pg::Connection* log, const std::string& txn_id,
                                    const std::string& coordinator, const std::string& type,
                                    const std::string& state, int http_status,
                                    const std::string& result, pg::Deadline deadline);
StatusOr<std::optional<LoggedOutcome>> ReadOutcome(pg::Connection* log, const std::string& txn_id,
                                                   pg::Deadline deadline);
// Holds the session-level advisory lock of a coordinator id on `log` (one process per id: a
// second `dais txn serve` or a `dais txn recover` while one runs would roll back transactions
// the first has in flight). False when another session holds it.
StatusOr<bool> TryLockCoordinatorId(pg::Connection* log, const std::string& coordinator,
                                    pg::Deadline deadline);

// Marks committed-everywhere transactions done (asynchronous commit: losing it only repeats a
// harmless check at recovery).
Status MarkDone(pg::Connection* log, const std::vector<std::string>& txn_ids,
                pg::Deadline deadline);

// A transaction's global id: "dais:<coordinator>:<txn_id>".
std::string GlobalId(const std::string& coordinator, const std::string& txn_id);
// Its prepared-transaction id on one participant: "<global id>@<participant>". PostgreSQL's
// gids are unique per server, so two participants that are databases of one server need two
// (issue 32: with one gid for both, every transaction failed "already in use").
std::string ParticipantGid(const std::string& global_id, const std::string& participant);
// The transaction id of a gid read back from `participant` under `prefix` (GlobalId(c, "")); a
// gid of an older dais has no participant suffix.
std::string TxnIdOfGid(const std::string& gid, const std::string& prefix,
                       const std::string& participant);

}  // namespace dais::txn
