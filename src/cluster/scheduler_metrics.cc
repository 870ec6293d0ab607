#include "cluster/scheduler_metrics.h"

namespace dais::cluster {

SchedulerMetrics& SchedulerMetrics::Get() {
  static SchedulerMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Global();
    return new SchedulerMetrics{
        r.AddCounter("dais_scheduler_placements_total", "Instances placed on a node by the leader.",
                     {"policy"}),
        r.AddCounter("dais_scheduler_placement_failures_total",
                     "Placements that found no node, by what most nodes lacked.", {"reason"}),
        r.AddCounter("dais_scheduler_preemptions_total",
                     "Best-effort instances removed to place a latency-sensitive one.", {})
            .Get({}),
        r.AddCounter("dais_scheduler_unassignments_total",
                     "Assignments removed, by reason (node_left, drain, deleted, scaled_down, "
                     "failed, preempted, resized).",
                     {"reason"}),
        r.AddGauge("dais_scheduler_pending_instances",
                   "Instances of deployments that no node can take now.", {})
            .Get({}),
        r.AddGauge("dais_scheduler_fragmented_gpus",
                   "Free GPU capacity the deployments' instances cannot use (FGD's measure), in "
                   "GPUs.",
                   {})
            .Get({}),
        r.AddGauge("dais_scheduler_unallocated_gpus", "GPU capacity no instance holds, in GPUs.",
                   {})
            .Get({}),
        r.AddGauge("dais_scheduler_leader", "1 while this replica is the leader.", {}).Get({}),
        r.AddHistogram("dais_scheduler_decision_duration_seconds",
                       "Time to choose a node for one instance.", {}, metrics::LatencyBuckets())
            .Get({}),
        r.AddHistogram("dais_scheduler_reconcile_duration_seconds",
                       "Time of one reconciliation, its etcd transaction included.", {},
                       metrics::LatencyBuckets())
            .Get({}),
    };
  }();
  return *m;
}

}  // namespace dais::cluster
