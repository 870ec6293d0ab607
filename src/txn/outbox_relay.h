// Moves committed outbox rows of one participant to the event stream: read a batch
// (SELECT ... FOR UPDATE SKIP LOCKED, so relays of several coordinators share the work), publish
// it (event id "<participant>:<outbox id>"), delete it, commit. A relay that dies between
// publishing and deleting publishes the batch again after restart, with the same event ids:
// consumers skip what they applied (at-least-once delivery, idempotent apply). Rows of prepared
// transactions are invisible until COMMIT PREPARED, so nothing uncommitted is ever published.
//
// Woken by the coordinator after each commit on its participant; polls every poll_ms besides
// (commits made by recovery or by another coordinator).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "txn/pg.h"

namespace dais::streams {
class EventStream;
}

namespace dais::txn {

struct RelayOptions {
  int batch = 512;
  int poll_ms = 50;
};

class OutboxRelay {
 public:
  // `stream` is borrowed and shared with other relays (it must be thread-safe: the Redis one is).
  OutboxRelay(std::string participant, std::string conninfo, streams::EventStream* stream,
              RelayOptions options);
  ~OutboxRelay();
  void Start();
  void Stop();
  // Relay now (called after a commit on this participant).
  void Wake();
  // One pass: events published (0 when none; an error leaves the rows for the next pass).
  StatusOr<size_t> RelayOnce();

 private:
  void Loop();

  const std::string participant_, conninfo_;
  streams::EventStream* stream_;
  const RelayOptions options_;
  std::unique_ptr<pg::Connection> conn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace dais::txn
