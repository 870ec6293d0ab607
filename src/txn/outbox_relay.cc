#include "txn/outbox_relay.h"

#include "common/logging.h"
#include "streams/event_stream.h"
#include "txn/txn_metrics.h"

namespace dais::txn {

namespace {
constexpr std::chrono::milliseconds kTimeout{5000};
}

OutboxRelay::OutboxRelay(std::string participant, std::string conninfo,
                         streams::EventStream* stream, RelayOptions options)
    : participant_(std::move(participant)),
      conninfo_(std::move(conninfo)),
      stream_(stream),
      options_(options) {}

OutboxRelay::~OutboxRelay() { Stop(); }

void OutboxRelay::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void OutboxRelay::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OutboxRelay::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void OutboxRelay::Loop() {
  Status last = OkStatus();
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms),
                   [&] { return woken_ || stopping_; });
      if (stopping_) return;
      woken_ = false;
    }
    while (true) {  // drain: a full batch means more may be waiting
      auto n = RelayOnce();
      if (!n.ok()) {
        if (n.status().message() != last.message()) {
          LOG_WARNING("outbox relay {}: {} (retrying)", participant_, n.status().message());
        }
        last = n.status();
        break;
      }
      last = OkStatus();
      if (*n < static_cast<size_t>(options_.batch)) break;
    }
  }
}

StatusOr<size_t> OutboxRelay::RelayOnce() {
  auto& m = TxnMetrics::Get();
  const auto deadline = pg::Clock::now() + kTimeout;
  std::string error;
  pg::Connection* c = pg::EnsureConnected(&conn_, conninfo_, deadline, &error);
  if (!c) return Unavailable(participant_ + ": " + error);
  ASSIGN_OR_RETURN(
      auto read,
      c->Run({{"BEGIN", {}},
              {"SELECT id, stream, txn_id, payload, traceparent FROM dais_outbox ORDER BY id"
               " LIMIT " +
                   std::to_string(options_.batch) + " FOR UPDATE SKIP LOCKED",
               {}}},
             deadline));
  if (!read[1].ok) {
    (void)c->Exec("ROLLBACK", deadline);
    return Unavailable(participant_ + ": " + pg::Describe(read[1]));
  }
  const auto& rows = read[1].rows;
  if (rows.empty()) {
    RETURN_IF_ERROR(c->Exec("COMMIT", deadline).status());
    return size_t{0};
  }
  std::vector<streams::Event> events;
  std::string ids = "{";
  for (const auto& r : rows) {
    events.push_back({*r[1], participant_ + ":" + *r[0], {{"txn_id", *r[2]}, {"payload", *r[3]}}});
    if (r[4]) events.back().fields.emplace_back("traceparent", *r[4]);
    ids += (ids.size() > 1 ? "," : "") + *r[0];
  }
  ids += "}";
  if (Status st = stream_->Publish(events); !st.ok()) {
    m.outbox.Get({participant_, "failed"}).Increment(static_cast<double>(events.size()));
    (void)c->Exec("ROLLBACK", deadline);
    return st;
  }
  ASSIGN_OR_RETURN(
      auto del,
      c->Run({{"DELETE FROM dais_outbox WHERE id = ANY($1::bigint[])", {ids}}, {"COMMIT", {}}},
             deadline));
  if (!del[0].ok || !del[1].ok) {
    return Unavailable(participant_ +
                       ": delete relayed rows: " + pg::Describe(del[0].ok ? del[1] : del[0]));
  }
  m.outbox.Get({participant_, "relayed"}).Increment(static_cast<double>(events.size()));
  return rows.size();
}

}  // namespace dais::txn
