// The scheduler's decisions, kept in etcd for people: /dais/events/<time>-<scheduler>-<seq>, as
// JSON {"time_ms", "kind", "deployment", "node", "message", "scheduler"}. Written by the leader in
// the same transaction as the decision (a deposed leader's events are rejected with its writes),
// under a lease of an hour renewed by a new lease every half hour: an event lives 30 to 60 min.
// Read by `dais ctl get events` and `dais ctl watch`.
#pragma once

#include <cstdint>
#include <string>

#include "dais/status.h"

namespace dais::cluster {

inline constexpr const char* kEventsPrefix = "/dais/events/";

struct ClusterEvent {
  int64_t time_ms = 0;  // Unix time
  // "placed", "unassigned", "failed" (an instance reported FAILED), "pending", "preempted",
  // "version" (an assignment moved to the deployment's new version), "leader".
  std::string kind;
  std::string deployment;
  std::string node;
  std::string message;
  std::string scheduler;  // the replica that decided

  std::string ToJson() const;
  // Sorts by time: 13-digit milliseconds, then the scheduler and a sequence number.
  std::string Key(int64_t sequence) const;
};

StatusOr<ClusterEvent> ClusterEventFromJson(const std::string& json);

// "2026-12-02 09:14:26.631" (UTC) of a Unix time in milliseconds.
std::string FormatTimeMs(int64_t time_ms);

}  // namespace dais::cluster
