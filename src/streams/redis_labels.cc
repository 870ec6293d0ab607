#include "streams/redis_labels.h"

#include <chrono>

#include "common/logging.h"
#include "metrics/registry.h"
#include "redis/script.h"
#include "streams/redis_feedback.h"

namespace dais::streams {
namespace {

metrics::Family<metrics::Counter>& LabelsTotal() {
  static auto& f = metrics::Registry::Global().AddCounter(
      "dais_labels_total",
      "Labels taken by POST /labels, by outcome: stored (in the label stream), failed (Redis "
      "refused or did not answer: the client got 503).",
      {"outcome"});
  return f;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One request's labels, appended in one script: atomic on a standalone Redis and on Redis
// Cluster alike (one key, so one slot; a MOVED redirect re-sends the whole script, where a
// MULTI / EXEC pipeline had its commands redirected one by one outside the transaction). The
// shebang makes Redis refuse the script before it runs when it is out of memory, so a script
// never stops half-way on OOM. ARGV: max_len, received_ms, then per label request_id,
// entity_ids, time_ms, labels, source.
const redis::Script& AppendLabels() {
  static const redis::Script kScript(R"(#!lua
local n = (#ARGV - 2) / 5
for i = 0, n - 1 do
  local b = 2 + i * 5
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'request_id', ARGV[b + 1],
             'entity_ids', ARGV[b + 2], 'time_ms', ARGV[b + 3], 'labels', ARGV[b + 4],
             'source', ARGV[b + 5], 'received_ms', ARGV[2])
end
return n
)");
  return kScript;
}

}  // namespace

StatusOr<std::unique_ptr<RedisLabelStream>> RedisLabelStream::Create(LabelStreamOptions options) {
  ASSIGN_OR_RETURN(StreamAddress address, ParseStreamUrl(options.url));
  ASSIGN_OR_RETURN(std::unique_ptr<redis::Client> client,
                   ConnectStreamClient(address, options.tls, std::chrono::milliseconds(2000)));
  LabelsTotal().Get({"stored"});
  LabelsTotal().Get({"failed"});
  if (!client->WaitUntilReachable(std::chrono::seconds(2))) {
    LOG_WARNING("label stream {}: Redis not reachable yet; POST /labels answers 503 until it is",
                options.url);
  }
  std::string stream = address.stream;
  return std::unique_ptr<RedisLabelStream>(
      new RedisLabelStream(std::move(options), std::move(stream), std::move(client)));
}

RedisLabelStream::RedisLabelStream(LabelStreamOptions options, std::string stream,
                                   std::unique_ptr<redis::Client> client)
    : options_(std::move(options)), stream_(std::move(stream)), client_(std::move(client)) {}

void RedisLabelStream::Write(std::vector<server::Label> labels, std::function<void(Status)> done) {
  std::vector<std::string> args;
  args.reserve(2 + labels.size() * 5);
  args.push_back(std::to_string(options_.max_len));
  args.push_back(std::to_string(NowMs()));
  for (const server::Label& l : labels) {
    args.push_back(l.request_id);
    args.push_back(server::EntityIdsJson(l));
    args.push_back(std::to_string(l.time_ms));
    args.push_back(server::LabelValuesJson(l));
    args.push_back(l.source);
  }
  const auto n = static_cast<int64_t>(labels.size());
  client_->Eval(
      AppendLabels(), {stream_}, std::move(args),
      std::chrono::steady_clock::now() + std::chrono::seconds(2),
      [n, done = std::move(done)](StatusOr<redis::Reply> reply) {
        Status s;
        if (!reply.ok()) {
          s = Unavailable("label stream: " + std::string(reply.status().message()));
        } else if (reply->is_error()) {
          s = Unavailable("label stream: " + reply->str);
        } else if (reply->integer != n) {
          s = Unavailable("label stream: the script appended " + std::to_string(reply->integer) +
                          " of " + std::to_string(n) + " labels");
        }
        LabelsTotal().Get({s.ok() ? "stored" : "failed"}).Increment(static_cast<double>(n));
        done(s);
      });
}

}  // namespace dais::streams
