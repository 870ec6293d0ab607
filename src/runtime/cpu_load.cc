#include "runtime/cpu_load.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

namespace dais::runtime {
namespace {

uint64_t ProcessCpuNs() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto ns = [](const timeval& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000 +
           static_cast<uint64_t>(t.tv_usec) * 1000;
  };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

// The first line of /proc/stat: user nice system idle iowait irq softirq steal (ticks). Stolen
// time counts as busy: those cores were not ours to use.
void MachineTicks(CpuTimes* t) {
  FILE* f = std::fopen("/proc/stat", "re");
  if (f == nullptr) return;
  unsigned long long v[8] = {};
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (n < 4) return;
  t->machine_busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t->machine_total = t->machine_busy + v[3] + v[4];
}

CpuTimes SampleCpu() {
  CpuTimes t;
  t.process_ns = ProcessCpuNs();
  MachineTicks(&t);
  return t;
}

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

double Fraction(uint64_t now, uint64_t then, double over) {
  return now > then && over > 0 ? static_cast<double>(now - then) / over : 0;
}

}  // namespace

CpuLoad::CpuLoad(int cores, Sampler sample) : cores_(std::max(1, cores)), sample_(sample) {}

CpuLoad::Figures CpuLoad::Busy(uint64_t now_ns) {
  auto last = [this] {
    return Figures{process_.load(std::memory_order_relaxed),
                   machine_.load(std::memory_order_relaxed)};
  };
  const uint64_t start = window_start_ns_.load(std::memory_order_relaxed);
  if (start != 0 && now_ns < start + kWindowNs) return last();
  std::unique_lock lock(sample_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return last();
  const uint64_t begun = window_start_ns_.load(std::memory_order_relaxed);
  if (begun != 0 && now_ns < begun + kWindowNs) return last();
  const CpuTimes t = sample_();
  if (begun != 0) {
    process_.store(Fraction(t.process_ns, window_start_.process_ns,
                            static_cast<double>(now_ns - begun) * cores_),
                   std::memory_order_relaxed);
    machine_.store(Fraction(t.machine_busy, window_start_.machine_busy,
                            static_cast<double>(t.machine_total - window_start_.machine_total)),
                   std::memory_order_relaxed);
  }
  window_start_ = t;
  window_start_ns_.store(now_ns, std::memory_order_relaxed);
  return last();
}

CpuLoad& CpuLoad::Global() {
  static CpuLoad load(AffinityCores(), SampleCpu);
  return load;
}

}  // namespace dais::runtime
