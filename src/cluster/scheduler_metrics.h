// The live scheduler's Prometheus metrics (docs/cluster.md lists them), on `dais scheduler
// --metrics-port`. Every replica exposes them; a standby's counters stay still and its
// dais_scheduler_leader is 0.
#pragma once

#include "metrics/registry.h"

namespace dais::cluster {

struct SchedulerMetrics {
  metrics::Family<metrics::Counter>& placements;  // {policy}
  metrics::Family<metrics::Counter>& failures;    // {reason}: pending_reason.h's labels
  metrics::Counter& preemptions;
  metrics::Family<metrics::Counter>& unassignments;  // {reason}
  metrics::Gauge& pending;
  metrics::Gauge& fragmented_gpus;
  metrics::Gauge& unallocated_gpus;
  metrics::Gauge& leader;
  metrics::Histogram& decision;   // one placement (the policy's choice), seconds
  metrics::Histogram& reconcile;  // one reconciliation (decisions and the etcd write), seconds

  static SchedulerMetrics& Get();
};

}  // namespace dais::cluster
