// Threads that run vector searches off the I/O threads, all from one queue (docs/memory.md,
// "Threads"). A search costs a hundred microseconds or more; run on the I/O thread that
// read it, every connection of that thread waits behind it, and when the scheduler takes that
// thread off its core they all wait for its next turn. From one queue, a search goes to
// whichever search thread is free: one preempted thread delays only the search it holds. On 2
// cores shared with the load generator the hand-off measured slower than searching on the I/O
// threads (docs/benchmarks.md, "Threads and the tail"): off by default.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace dais::memory {

class SearchPool {
 public:
  // `threads` >= 1 named `name`0, `name`1...; at most `max_queued` tasks wait (Post refuses more).
  SearchPool(int threads, size_t max_queued, const std::string& name = "mem-search");
  SearchPool(const SearchPool&) = delete;
  SearchPool& operator=(const SearchPool&) = delete;
  // Runs the tasks still queued, then joins the threads.
  ~SearchPool();

  // Queues `task` for the next free thread, first in first out; false (and `task` not kept)
  // when max_queued tasks wait already (0: every task is refused) or the pool is stopping.
  bool Post(std::function<void()> task);
  size_t queued() const;
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Run();

  const size_t max_queued_;
  mutable Mutex mu_;
  CondVar cv_{&mu_};
  std::deque<std::function<void()>> queue_ DAIS_GUARDED_BY(mu_);
  bool stopping_ DAIS_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace dais::memory
