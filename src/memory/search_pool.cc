#include "memory/search_pool.h"

#include <algorithm>
#include <utility>

#include "common/thread_name.h"

namespace dais::memory {

SearchPool::SearchPool(int threads, size_t max_queued, const std::string& name)
    : max_queued_(max_queued) {
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this, thread_name = name + std::to_string(i)] {
      SetThreadName(thread_name);
      Run();
    });
  }
}

SearchPool::~SearchPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  for (auto& t : threads_) t.join();
}

bool SearchPool::Post(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.Signal();
  return true;
}

size_t SearchPool::queued() const {
  MutexLock lock(&mu_);
  return queue_.size();
}

void SearchPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) cv_.Wait();
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace dais::memory
