// What an I/O thread may ask of the kernel's scheduler: a core of its own, as nginx's
// `worker_cpu_affinity auto` binds its workers, and a short time slice, so that a thread woken
// beside it (a client, another I/O thread) gets the core within that slice rather than the
// default one (docs/memory.md, "I/O threads and the scheduler").
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace dais {

// The kernel's struct sched_attr, first version (48 bytes; <linux/sched/types.h> cannot be
// included beside glibc's <sched.h>, which defines sched_param again).
struct KernelSchedAttr {
  uint32_t size = sizeof(KernelSchedAttr);
  uint32_t policy = 0;
  uint64_t flags = 0;
  int32_t nice = 0;
  uint32_t priority = 0;
  uint64_t runtime_ns = 0;  // a normal thread's slice (Linux 6.12 and later)
  uint64_t deadline_ns = 0, period_ns = 0;
};
static_assert(sizeof(KernelSchedAttr) == 48);

// The cores this process may run on (sched_getaffinity), in order; empty if it cannot be read.
inline std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Binds the calling thread to core `cpu`; false if the kernel refuses (the thread then runs
// where the scheduler puts it, as without binding).
inline bool BindThisThreadToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Asks for time slices of `slice` for the calling thread (Linux 6.12's EEVDF scheduler reads
// sched_attr.sched_runtime of a normal thread as its slice and keeps it within 0.1 to 100 ms;
// earlier kernels ignore it). The thread's policy and nice value stay as they are. False if the
// kernel refuses.
inline bool SetThisThreadSlice(std::chrono::microseconds slice) {
  KernelSchedAttr attr;
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) return false;
  attr.size = sizeof(attr);
  attr.flags = 0;
  attr.runtime_ns = static_cast<uint64_t>(slice.count()) * 1000;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

// The slice of thread `tid` (0: the calling thread) as the kernel holds it
// (sched_attr.sched_runtime: 0 where the kernel keeps none), or -1.
inline std::chrono::microseconds ThreadSlice(pid_t tid = 0) {
  KernelSchedAttr attr;
  if (syscall(SYS_sched_getattr, tid, &attr, sizeof(attr), 0) != 0) {
    return std::chrono::microseconds(-1);
  }
  return std::chrono::microseconds(attr.runtime_ns / 1000);
}

}  // namespace dais
