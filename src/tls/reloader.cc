#include "tls/reloader.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace dais::tls {

namespace {

std::atomic<bool> g_hangup{false};

void OnHangup(int) { g_hangup.store(true); }

struct Watched {
  Mutex mu;
  std::vector<std::weak_ptr<ServerContext>> contexts DAIS_GUARDED_BY(mu);

  std::vector<std::shared_ptr<ServerContext>> Live() {
    MutexLock lock(&mu);
    std::vector<std::shared_ptr<ServerContext>> out;
    for (auto& w : contexts)
      if (auto c = w.lock()) out.push_back(std::move(c));
    return out;
  }
};

Watched& Registry() {
  static auto* w = new Watched;
  return *w;
}

void Watch() {
  constexpr auto kTick = std::chrono::milliseconds(200);
  for (int tick = 0;; ++tick) {
    std::this_thread::sleep_for(kTick);
    if (g_hangup.exchange(false)) {
      for (auto& c : Registry().Live()) (void)c->Reload("SIGHUP");
    } else if (tick % 5 == 0) {
      for (auto& c : Registry().Live()) c->ReloadIfChanged();
    }
  }
}

}  // namespace

void WatchForReload(const std::shared_ptr<ServerContext>& context) {
  static std::once_flag once;
  {
    MutexLock lock(&Registry().mu);
    Registry().contexts.push_back(context);
  }
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = OnHangup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, nullptr);
    std::thread(Watch).detach();
  });
}

}  // namespace dais::tls
