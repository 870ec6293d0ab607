// Binding a thread to one core, as nginx's `worker_cpu_affinity auto` binds its workers
// (EndpointOptions::cpu_affinity; docs/memory.md, "Threads").
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace dais {

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

}  // namespace dais
