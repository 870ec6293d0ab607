#include "etcd/watch.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "etcd/client_impl.h"

namespace dais::etcd {

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
        LOG_WARNING("etcd watch {}: {} (retrying in {} ms)", prefix_, snap.status().message(),
                    backoff.count());
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        continue;
      }
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
