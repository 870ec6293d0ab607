#include "txn/txn_metrics.h"

namespace dais::txn {

TxnMetrics& TxnMetrics::Get() {
  static TxnMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Global();
    return new TxnMetrics{
        r.AddCounter("dais_txn_transactions_total",
                     "Transactions answered, by type and outcome (committed, aborted, in_doubt: "
                     "the decision could not be confirmed, bad_request).",
                     {"type", "outcome"}),
        r.AddCounter("dais_txn_aborts_total", "Aborted transactions by type and reason.",
                     {"type", "reason"}),
        r.AddHistogram("dais_txn_duration_seconds",
                       "From the request to the answer (prepare, gate and decision included).",
                       {"type"}, metrics::LatencyBuckets()),
        r.AddCounter("dais_txn_gate_decisions_total",
                     "Model gate results: pass, refuse (score above the threshold), "
                     "error_refused / error_allowed (model down or slow, by the gate's policy).",
                     {"type", "result"}),
        r.AddGauge("dais_txn_in_doubt_transactions",
                   "Transactions prepared on a participant (or perhaps on one that cannot be "
                   "reached) without a completed decision, at the resolver's last pass.",
                   {})
            .Get({}),
        r.AddGauge("dais_txn_in_doubt_oldest_age_seconds",
                   "Age of the oldest in-doubt transaction at the resolver's last pass (0: none).",
                   {})
            .Get({}),
        r.AddGauge("dais_txn_unmarked_commits_transactions",
                   "Commit decisions in the log not yet marked done (the resolver marks them "
                   "once every participant confirmed), at its last pass.",
                   {})
            .Get({}),
        r.AddCounter("dais_txn_recovery_actions_total",
                     "Recovery actions: commit / rollback of a prepared transaction, mark_done, "
                     "abort (a keyed request left unfinished).",
                     {"action"}),
        r.AddCounter("dais_txn_outbox_events_total",
                     "Outbox events moved to the event stream (relayed) or not (failed, retried).",
                     {"participant", "outcome"}),
        r.AddCounter("dais_stream_events_consumed_total",
                     "Events handled by a consumer: applied, duplicate (already applied: "
                     "skipped), failed (left pending, retried).",
                     {"consumer", "result"}),
    };
  }();
  return *m;
}

}  // namespace dais::txn
