// A node's live load, for the agent orchestrator (agents/orchestrator.h): once a second the
// share of the host's CPU time that was busy (from /proc/stat: everything but idle and iowait)
// over the last second, published under its own lease at /dais/node-load/<node> ({"cpu_busy":
// 0.93, "cpus": 2, "time_ms": ...}) and as the gauge dais_node_cpu_busy_ratio. A key of its own,
// not the node's registration: the gateway and the scheduler watch /dais/nodes/ and would
// rebuild on every second's change.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "dais/status.h"

namespace dais::cluster {

inline constexpr const char* kNodeLoadPrefix = "/dais/node-load/";

// Busy and total jiffies of the host (the "cpu" line of /proc/stat).
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
StatusOr<CpuTimes> ParseProcStat(const std::string& text);
// The busy share between two readings (0 when no time passed).
double BusyBetween(const CpuTimes& before, const CpuTimes& after);

class NodeLoadPublisher {
 public:
  NodeLoadPublisher(std::string node_id, std::vector<std::string> etcd_endpoints);
  ~NodeLoadPublisher();
  Status Start();
  void Stop();

 private:
  void Loop();

  const std::string node_id_;
  const std::vector<std::string> etcd_endpoints_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dais::cluster
