#include "etcd/watch.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "common/logging.h"
#include "etcd/client_impl.h"

namespace dais::etcd {
namespace {

// During an etcd outage every watcher of the process fails its snapshot at once, and again at
// each retry (about 14 watchers in a scheduler, once a second). The process logs the first
// failure, then at most one summary line every 30 s, and one line when all read again.
class OutageLog {
 public:
  static OutageLog& Get() {
    static OutageLog* log = new OutageLog;
    return *log;
  }

  void Failed(const std::string& prefix, const std::string& error) {
    MutexLock l(&mu_);
    const auto now = std::chrono::steady_clock::now();
    if (failing_.empty() && failures_ == 0) since_ = now;
    failing_.insert(prefix);
    ++failures_;
    if (logged_ != std::chrono::steady_clock::time_point{} &&
        now - logged_ < std::chrono::seconds(30)) {
      return;
    }
    if (logged_ == std::chrono::steady_clock::time_point{}) {
      LOG_WARNING("etcd watch {}: {} (retrying; watch failures are summed up every 30 s)", prefix,
                  error);
    } else {
      LOG_WARNING("etcd watches still failing after {} s: {} prefix(es), {} failed reads: {}",
                  std::chrono::duration_cast<std::chrono::seconds>(now - since_).count(),
                  failing_.size(), failures_, error);
    }
    logged_ = now;
  }

  void Recovered(const std::string& prefix) {
    MutexLock l(&mu_);
    if (failing_.erase(prefix) == 0 || !failing_.empty()) return;
    LOG_INFO(
        "etcd watches: reading again after {} s ({} failed reads)",
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since_)
            .count(),
        failures_);
    failures_ = 0;
    logged_ = {};
  }

 private:
  Mutex mu_;
  std::set<std::string> failing_ DAIS_GUARDED_BY(mu_);
  int64_t failures_ DAIS_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point since_ DAIS_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point logged_ DAIS_GUARDED_BY(mu_);
};

}  // namespace

Watcher::Watcher(Client* client, std::string prefix, Callbacks callbacks, int64_t start_revision)
    : client_(client),
      prefix_(std::move(prefix)),
      callbacks_(std::move(callbacks)),
      start_revision_(start_revision) {
  thread_ = std::thread([this] { Run(); });
}

Watcher::~Watcher() {
  stop_.store(true);
  {
    MutexLock l(&mu_);
    if (context_ != nullptr) static_cast<::grpc::ClientContext*>(context_)->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void Watcher::Run() {
  int64_t next = start_revision_;
  bool need_snapshot = start_revision_ <= 0;
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_.load()) {
    if (need_snapshot) {
      StatusOr<RangeResult> snap = client_->Get(prefix_, /*prefix=*/true);
      if (!snap.ok()) {
        OutageLog::Get().Failed(prefix_, snap.status().message());
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        continue;
      }
      OutageLog::Get().Recovered(prefix_);
      snapshots_.fetch_add(1);
      if (callbacks_.on_snapshot) callbacks_.on_snapshot(*snap);
      next = snap->revision + 1;
      need_snapshot = false;
    }
    const auto started = std::chrono::steady_clock::now();
    need_snapshot = !Stream(&next);
    if (stop_.load()) break;
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5)) {
      backoff = std::chrono::milliseconds(100);  // it had been up a while
    }
    reconnects_.fetch_add(1);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

bool Watcher::Stream(int64_t* next) {
  Client::Impl* impl = client_->impl();
  Client::Impl::Endpoint& endpoint = impl->Current();
  ::grpc::ClientContext ctx;
  {
    MutexLock l(&mu_);
    if (stop_.load()) return true;
    context_ = &ctx;
  }
  auto stream = endpoint.watch->Watch(&ctx);
  etcdserverpb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(prefix_);
  create->set_range_end(PrefixEnd(prefix_));
  create->set_start_revision(*next);
  bool resumable = true;
  if (stream->Write(req)) {
    etcdserverpb::WatchResponse resp;
    while (stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        LOG_INFO("etcd watch {}: revision {} was compacted (oldest kept {}): taking a snapshot",
                 prefix_, *next, resp.compact_revision());
        resumable = false;
        break;
      }
      if (resp.canceled()) break;
      if (resp.events_size() == 0) continue;
      std::vector<Event> events;
      events.reserve(static_cast<size_t>(resp.events_size()));
      for (const auto& e : resp.events()) {
        Event ev;
        ev.type = e.type() == mvccpb::Event::DELETE ? Event::Type::kDelete : Event::Type::kPut;
        ev.kv = KeyValue{e.kv().key(),          e.kv().value(),   e.kv().create_revision(),
                         e.kv().mod_revision(), e.kv().version(), e.kv().lease()};
        *next = std::max(*next, e.kv().mod_revision() + 1);
        events.push_back(std::move(ev));
      }
      if (callbacks_.on_events) callbacks_.on_events(events);
    }
  }
  {
    MutexLock l(&mu_);
    context_ = nullptr;
  }
  ctx.TryCancel();
  ::grpc::Status s = stream->Finish();
  if (!stop_.load() && resumable) {
    LOG_WARNING("etcd watch {} on {} ended ({}): resuming from revision {}", prefix_,
                endpoint.address, s.ok() ? "closed" : s.error_message(), *next);
    impl->Advance(endpoint);
  }
  return resumable;
}

}  // namespace dais::etcd
