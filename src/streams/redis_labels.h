// The label stream on Redis Streams (docs/learning-loop.md): `dais serve --label-stream
// redis://HOST:PORT/STREAM` appends each label POST /labels took, one entry per label, with the
// fields request_id, entity_ids (a JSON array), time_ms, labels (a JSON object), source and
// received_ms; `dais archive` archives the stream like the feedback stream.
//
// A request's labels are written by one Lua script (one key: one slot on Redis Cluster too): all
// of them or none, and the client's 200 comes only after Redis answered (a 503 means nothing
// was stored, or, when the answer was lost, that the retry may store them twice).
#pragma once

#include <memory>
#include <string>

#include "dais/status.h"
#include "redis/client.h"
#include "server/labels.h"
#include "tls/config.h"

namespace dais::streams {

struct LabelStreamOptions {
  std::string url;           // redis://HOST:PORT/STREAM (rediss:// for TLS)
  tls::ClientConfig tls;     // --redis-tls-*
  size_t max_len = 1000000;  // MAXLEN ~ of the stream
};

class RedisLabelStream : public server::LabelSink {
 public:
  // Parses the URL and connects; Redis need not be up yet (writes fail with 503 until it is).
  static StatusOr<std::unique_ptr<RedisLabelStream>> Create(LabelStreamOptions options);

  void Write(std::vector<server::Label> labels, std::function<void(Status)> done) override;

 private:
  RedisLabelStream(LabelStreamOptions options, std::string stream,
                   std::unique_ptr<redis::Client> client);
  const LabelStreamOptions options_;
  const std::string stream_;
  std::unique_ptr<redis::Client> client_;
};

}  // namespace dais::streams
