#include "cluster/node_load.h"

#include <fstream>
#include <sstream>

#include "common/logging.h"
#include "etcd/client.h"
#include "fmt/format.h"
#include "metrics/registry.h"

namespace dais::cluster {

StatusOr<CpuTimes> ParseProcStat(const std::string& text) {
  std::istringstream in(text);
  std::string label;
  in >> label;
  if (label != "cpu") return InvalidArgument("/proc/stat does not start with the cpu line");
  // user nice system idle iowait irq softirq steal (guest time is inside user and nice).
  uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && in >> v[n]) ++n;
  if (n < 4) return InvalidArgument("/proc/stat: the cpu line has fewer than 4 counters");
  CpuTimes t;
  for (int i = 0; i < n; ++i) t.total += v[i];
  t.busy = t.total - v[3] - (n > 4 ? v[4] : 0);
  return t;
}

double BusyBetween(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0;
  return static_cast<double>(after.busy - before.busy) /
         static_cast<double>(after.total - before.total);
}

namespace {

StatusOr<CpuTimes> ReadProcStat() {
  std::ifstream f("/proc/stat");
  if (!f) return Unavailable("cannot read /proc/stat");
  std::string line;
  std::getline(f, line);
  return ParseProcStat(line);
}

}  // namespace

NodeLoadPublisher::NodeLoadPublisher(std::string node_id, std::vector<std::string> etcd_endpoints)
    : node_id_(std::move(node_id)), etcd_endpoints_(std::move(etcd_endpoints)) {}

NodeLoadPublisher::~NodeLoadPublisher() { Stop(); }

Status NodeLoadPublisher::Start() {
  RETURN_IF_ERROR(ReadProcStat().status());
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void NodeLoadPublisher::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void NodeLoadPublisher::Loop() {
  auto client = etcd::Client::Create({etcd_endpoints_});
  if (!client.ok()) {
    LOG_WARNING("node {}: no load published: {}", node_id_, client.status().message());
    return;
  }
  metrics::Gauge& gauge =
      metrics::Registry::Global()
          .AddGauge("dais_node_cpu_busy_ratio",
                    "Share of the host's CPU time busy over the last second (/proc/stat).", {})
          .Get({});
  const std::string key = std::string(kNodeLoadPrefix) + node_id_;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  auto before = ReadProcStat();
  int64_t lease = 0;
  while (!stop_.load()) {
    for (int i = 0; i < 20 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto now = ReadProcStat();
    if (!now.ok() || !before.ok()) {
      before = now;
      continue;
    }
    const double busy = BusyBetween(*before, *now);
    before = now;
    gauge.Set(busy);
    if (lease == 0) {
      auto l = (*client)->GrantLease(5);
      if (!l.ok()) continue;
      lease = *l;
    } else if (!(*client)->KeepAliveOnce(lease).ok()) {
      lease = 0;
      continue;
    }
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    if (!(*client)
             ->Put(key,
                   fmt::format(R"({{"cpu_busy":{:.4f},"cpus":{},"time_ms":{}}})", busy, cpus, ms),
                   lease)
             .ok()) {
      lease = 0;
    }
  }
  if (lease != 0) (void)(*client)->RevokeLease(lease);
}

}  // namespace dais::cluster
