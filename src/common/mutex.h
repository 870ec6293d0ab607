// Mutex with clang thread-safety annotations (after LevelDB's port::Mutex and Abseil).
// Build with the "clang" preset to have -Wthread-safety check DAIS_GUARDED_BY / REQUIRES.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define DAIS_TSA(x) __attribute__((x))
#else
#define DAIS_TSA(x)
#endif

#define DAIS_CAPABILITY(x) DAIS_TSA(capability(x))
#define DAIS_SCOPED_CAPABILITY DAIS_TSA(scoped_lockable)
#define DAIS_GUARDED_BY(x) DAIS_TSA(guarded_by(x))
#define DAIS_PT_GUARDED_BY(x) DAIS_TSA(pt_guarded_by(x))
#define DAIS_REQUIRES(...) DAIS_TSA(requires_capability(__VA_ARGS__))
#define DAIS_EXCLUDES(...) DAIS_TSA(locks_excluded(__VA_ARGS__))
#define DAIS_ACQUIRE(...) DAIS_TSA(acquire_capability(__VA_ARGS__))
#define DAIS_RELEASE(...) DAIS_TSA(release_capability(__VA_ARGS__))
#define DAIS_NO_THREAD_SAFETY_ANALYSIS DAIS_TSA(no_thread_safety_analysis)

namespace dais {

class DAIS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() DAIS_ACQUIRE() { mu_.lock(); }
  void Unlock() DAIS_RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class DAIS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) DAIS_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() DAIS_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// Condition variable bound to a Mutex. Wait* must be called with the mutex held.
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  void Wait() DAIS_REQUIRES(mu_) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false on timeout.
  template <typename Clock, typename Duration>
  bool WaitUntil(std::chrono::time_point<Clock, Duration> deadline)
      DAIS_REQUIRES(mu_) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    bool woke = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* mu_;
  std::condition_variable cv_;
};

}  // namespace dais
