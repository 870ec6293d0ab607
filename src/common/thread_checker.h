// Checks in debug builds that an object meant for one thread is only used from that thread (as
// Envoy asserts its dispatcher-thread rules, and Chromium's SequenceChecker): the first checked
// call binds the object to its thread, every later one must come from the same thread.
//
//   class Router {
//     void Submit(...) { DAIS_DCHECK_ON_THREAD(thread_); ... }
//     ThreadChecker thread_;
//   };
//
// Release builds (NDEBUG) compile the macro away (the checker is then an unused 8-byte member).
#pragma once

#include <atomic>
#include <cstdlib>
#include <thread>

#include "common/logging.h"

namespace dais {

class ThreadChecker {
 public:
  // True on the bound thread; the first call binds the checker to the calling thread.
  bool CalledOnBoundThread() {
    std::thread::id none;
    const std::thread::id self = std::this_thread::get_id();
    return owner_.compare_exchange_strong(none, self) || none == self;
  }

 private:
  std::atomic<std::thread::id> owner_{};
};

}  // namespace dais

#ifdef NDEBUG
#define DAIS_DCHECK_ON_THREAD(checker) \
  do {                                 \
  } while (false)
#else
#define DAIS_DCHECK_ON_THREAD(checker)                                              \
  do {                                                                              \
    if (!(checker).CalledOnBoundThread()) {                                         \
      LOG_ERROR("{} called off the thread it belongs to ({})", __func__, #checker); \
      std::abort();                                                                 \
    }                                                                               \
  } while (false)
#endif
