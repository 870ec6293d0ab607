#include "streams/redis_labels.h"

#include <chrono>

#include "common/logging.h"
#include "metrics/registry.h"
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
  const std::string received = std::to_string(NowMs());
  const std::string max_len = std::to_string(options_.max_len);
  std::vector<redis::KeyedCommand> cmds;
  cmds.reserve(labels.size() + 2);
  cmds.push_back({stream_, {"MULTI"}});
  for (const server::Label& l : labels) {
    cmds.push_back(
        {stream_,
         {"XADD", stream_, "MAXLEN", "~", max_len, "*", "request_id", l.request_id, "entity_ids",
          server::EntityIdsJson(l), "time_ms", std::to_string(l.time_ms), "labels",
          server::LabelValuesJson(l), "source", l.source, "received_ms", received}});
  }
  cmds.push_back({stream_, {"EXEC"}});
  const size_t n = labels.size();
  client_->ExecuteBatch(
      std::move(cmds), std::chrono::steady_clock::now() + std::chrono::seconds(2),
      [n, done = std::move(done)](std::vector<StatusOr<redis::Reply>> replies) {
        Status s;
        const StatusOr<redis::Reply>& exec = replies.back();
        if (!exec.ok()) {
          s = Unavailable("label stream: " + std::string(exec.status().message()));
        } else if (exec->is_error()) {
          s = Unavailable("label stream: " + exec->str);
        } else if (exec->is_nil() || exec->elements.size() != n) {
          s = Unavailable("label stream: the transaction was not applied");
        } else {
          for (const redis::Reply& r : exec->elements) {
            if (r.is_error()) s = Unavailable("label stream: XADD: " + r.str);
          }
        }
        LabelsTotal().Get({s.ok() ? "stored" : "failed"}).Increment(static_cast<double>(n));
        done(s);
      });
}

}  // namespace dais::streams
