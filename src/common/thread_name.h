// Names the calling thread as `top`, `perf report --sort comm` and /proc/<pid>/task/*/comm show
// it (Linux keeps 15 bytes: longer names are cut).
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace dais {

inline void SetThreadName(std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace dais
