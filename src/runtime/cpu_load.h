// Whether the cores are the scarce resource and this process is what keeps them busy: the
// adaptive batching policy's signal (adaptive_batching.h) that an instance waiting for a larger
// batch does not idle a core but leaves it to the threads reading the next requests.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace dais::runtime {

// CPU time so far: this process's (ns), and the machine's busy and total time (any one unit).
struct CpuTimes {
  uint64_t process_ns = 0;
  uint64_t machine_busy = 0;
  uint64_t machine_total = 0;
};

class CpuLoad {
 public:
  // The window over which the load is measured (the machine's figures come in 10 ms ticks).
  static constexpr uint64_t kWindowNs = 100'000'000;
  // CPU-bound: the machine's cores at least this busy, this process using at least this
  // fraction of them (a neighbour's load alone does not count).
  static constexpr double kMachineBusy = 0.9;
  static constexpr double kProcessBusy = 0.4;

  struct Figures {
    double process = 0;  // this process's CPU time / (window * cores)
    double machine = 0;  // the machine's busy fraction
  };

  // `cores`: the cores the process may run on; `sample`: the clocks (injectable for tests).
  using Sampler = CpuTimes (*)();
  CpuLoad(int cores, Sampler sample);

  // The figures of the last completed window (zeros before the first completes). The first
  // caller after a window ends samples the clocks; every other call reads two atomics.
  // Thread-safe.
  Figures Busy(uint64_t now_ns);
  bool CpuBound(uint64_t now_ns) {
    const Figures f = Busy(now_ns);
    return f.machine >= kMachineBusy && f.process >= kProcessBusy;
  }

  // getrusage for the process, /proc/stat for the machine, sched_getaffinity for the cores.
  static CpuLoad& Global();

 private:
  const int cores_;
  const Sampler sample_;
  std::mutex sample_mu_;  // one sampler at a time; the others keep the last figures
  std::atomic<uint64_t> window_start_ns_{0};
  CpuTimes window_start_;  // guarded by sample_mu_
  std::atomic<double> process_{0};
  std::atomic<double> machine_{0};
};

}  // namespace dais::runtime
