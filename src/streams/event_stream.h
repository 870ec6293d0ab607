// Event streams for committed facts (the transaction outbox's events): an interface, so that a
// Kafka backend can be added beside Redis Streams, and the Redis Streams implementation.
//
// Delivery is at least once: a publisher that crashes after publishing and before recording it
// publishes again, with the same event id; consumers apply idempotently by that id.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dais/status.h"

namespace dais::redis {
class Client;
}

namespace dais::streams {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Event {
  std::string stream;
  std::string id;  // the producer's unique id (e.g. "<participant>:<outbox id>"), field "event_id"
  Fields fields;   // besides event_id
};

struct Entry {
  std::string entry_id;  // the stream's own id (what Ack takes)
  Fields fields;         // as published, event_id included
  std::string Field(const std::string& name) const;
};

class EventStream {
 public:
  virtual ~EventStream() = default;
  // Appends every event (in order per stream); an error means some may have been appended.
  virtual Status Publish(const std::vector<Event>& events) = 0;
  // Creates the consumer group (reading from the stream's start) unless it exists.
  virtual Status EnsureGroup(const std::string& stream, const std::string& group) = 0;
  // New entries for this consumer, waiting up to block_ms; `pending`: instead, the entries
  // delivered to this consumer and not yet acknowledged (after its restart).
  virtual StatusOr<std::vector<Entry>> Read(const std::string& stream, const std::string& group,
                                            const std::string& consumer, int count, int block_ms,
                                            bool pending) = 0;
  // Read of new entries (not `pending`) sent now, its answer taken from the future later: a
  // consumer overlaps the server's work with its own. The default reads when the answer is
  // taken.
  virtual std::future<StatusOr<std::vector<Entry>>> ReadAsync(const std::string& stream,
                                                              const std::string& group,
                                                              const std::string& consumer,
                                                              int count, int block_ms) {
    return std::async(std::launch::deferred, [=, this] {
      return Read(stream, group, consumer, count, block_ms, /*pending=*/false);
    });
  }
  // Takes over entries delivered to any consumer of the group and unacknowledged for at least
  // min_idle_ms (a consumer that crashed).
  virtual StatusOr<std::vector<Entry>> Claim(const std::string& stream, const std::string& group,
                                             const std::string& consumer, int min_idle_ms,
                                             int count) = 0;
  virtual Status Ack(const std::string& stream, const std::string& group,
                     const std::vector<std::string>& entry_ids) = 0;
};

// Redis Streams: XADD (MAXLEN ~ max_len), XGROUP CREATE ... MKSTREAM, XREADGROUP, XAUTOCLAIM,
// XACK. Blocking calls: use from a thread of your own, not the client's I/O thread. A consumer's
// blocking Read holds a connection: give consumers a client of their own.
std::unique_ptr<EventStream> MakeRedisEventStream(redis::Client* client, int64_t max_len);

}  // namespace dais::streams
