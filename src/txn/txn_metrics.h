// The transaction coordinator's and the event consumers' metrics (docs/metrics.md, "Transactions").
#pragma once

#include "metrics/registry.h"

namespace dais::txn {

struct TxnMetrics {
  // outcome: committed | aborted | in_doubt | bad_request
  metrics::Family<metrics::Counter>& transactions;
  // reason: branch_failed | gate_refused | gate_unavailable | prepare_timeout |
  //         participant_unavailable | log_unavailable
  metrics::Family<metrics::Counter>& aborts;
  metrics::Family<metrics::Histogram>& duration;  // request to answer, per type
  // result: pass | refuse | error_refused | error_allowed
  metrics::Family<metrics::Counter>& gate;
  metrics::Gauge& in_doubt;
  metrics::Gauge& in_doubt_age;
  metrics::Gauge& unmarked_commits;
  metrics::Family<metrics::Counter>& recovery;  // action: commit | rollback | mark_done | abort
  metrics::Family<metrics::Counter>& outbox;    // participant, outcome: relayed | failed
  metrics::Family<metrics::Counter>& consumed;  // consumer, result: applied | duplicate | failed
  static TxnMetrics& Get();
};

}  // namespace dais::txn
