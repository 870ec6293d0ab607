// Threads for requests that take long (repository load / unload) so that they hold no I/O
// thread. A finished thread is joined when the next task starts, the rest by JoinAll (shutdown),
// so a server answering many load / unload requests does not pile up finished threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace dais::server {

class BackgroundTasks {
 public:
  BackgroundTasks() = default;
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;
  ~BackgroundTasks() { JoinAll(); }

  void Run(std::function<void()> fn) DAIS_EXCLUDES(mu_) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    MutexLock lock(&mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
    tasks_.push_back(Task{std::thread([fn = std::move(fn), done] {
                            fn();
                            done->store(true);
                          }),
                          done});
  }

  // Waits for every task started so far.
  void JoinAll() DAIS_EXCLUDES(mu_) {
    std::vector<Task> tasks;
    {
      MutexLock lock(&mu_);
      tasks.swap(tasks_);
    }
    for (Task& t : tasks) t.thread.join();
  }

  size_t running_or_unreaped() DAIS_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return tasks_.size();
  }

 private:
  struct Task {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex mu_;
  std::vector<Task> tasks_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::server
