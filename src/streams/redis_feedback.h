// The feedback stream on Redis Streams (docs/streams.md): `dais serve --feedback-stream
// redis://HOST:PORT/STREAM` appends one entry per answered (sampled) inference with XADD ...
// MAXLEN ~ N, so the stream stays capped. Records wait in a bounded buffer and a thread of its
// own writes them in pipelined batches: the request path never waits for Redis; a full buffer
// drops the record (counted), as does a write Redis refused or did not answer.
//
// Entry fields: id, model, version, latency_us, record (the whole record as JSON: time_ms,
// entity_ids, inputs and outputs as {name, datatype, shape, data}; data as numbers for numeric
// types, base64 for BYTES / FP16 / BF16, absent when the tensor was larger than 64 KiB).
//
// Thread-safety: Offer from any thread; the rest from the owner.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "dais/status.h"
#include "redis/client.h"
#include "server/feedback.h"
#include "tls/config.h"

namespace dais::streams {

struct FeedbackStreamOptions {
  std::string url;          // redis://HOST:PORT/STREAM (rediss:// for TLS)
  tls::ClientConfig tls;    // CA, client certificate (--redis-tls-*)
  size_t max_len = 100000;  // MAXLEN ~ of the stream
  size_t buffer = 10000;    // records waiting at most; more are dropped
  size_t batch = 256;       // XADDs per pipelined write
};

struct StreamAddress {
  std::string redis;   // host:port
  std::string stream;  // the key
};
// "redis://HOST:PORT/STREAM" -> {HOST:PORT, STREAM}; InvalidArgument naming what is wrong.
StatusOr<StreamAddress> ParseStreamUrl(const std::string& url);

// A client for a stream's Redis (one connection; TLS from a rediss:// URL or `tls`), for the
// feedback and label streams.
StatusOr<std::unique_ptr<redis::Client>> ConnectStreamClient(const StreamAddress& address,
                                                             const tls::ClientConfig& tls,
                                                             std::chrono::milliseconds timeout);

// The JSON of a record (the entry's `record` field).
std::string FeedbackRecordJson(const server::FeedbackRecord& r);

class RedisFeedbackStream : public server::FeedbackSink {
 public:
  // Parses the URL and starts the writer; Redis need not be up yet (records are dropped,
  // counted, until it is).
  static StatusOr<std::unique_ptr<RedisFeedbackStream>> Create(FeedbackStreamOptions options);
  ~RedisFeedbackStream() override;  // writes what is buffered (up to 2 s), then stops

  bool Offer(server::FeedbackRecord record) override;

 private:
  RedisFeedbackStream(FeedbackStreamOptions options, StreamAddress address,
                      std::unique_ptr<redis::Client> client);
  void Run();

  const FeedbackStreamOptions options_;
  const StreamAddress address_;
  std::unique_ptr<redis::Client> client_;
  Mutex mu_;
  CondVar cv_{&mu_};
  std::deque<server::FeedbackRecord> queue_ DAIS_GUARDED_BY(mu_);
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  std::thread writer_;
};

}  // namespace dais::streams
