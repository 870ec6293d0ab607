#include "features/store/invalidation.h"

#include <cstring>

#include "common/logging.h"
#include "features/store/feature_store.h"
#include "metrics/registry.h"
#include "redis/client.h"
#include "redis/subscriber.h"

namespace dais::features {

namespace {

struct InvalidationMetrics {
  metrics::Counter& sent;
  metrics::Counter& received;
  metrics::Counter& publish_errors;
  metrics::Counter& bad_messages;
  metrics::Counter& resyncs;

  static InvalidationMetrics& Get() {
    auto& r = metrics::Registry::Global();
    static InvalidationMetrics m = [&r]() -> InvalidationMetrics {
      auto& keys = r.AddCounter("dais_feature_invalidations_total",
                                "Record keys in L1 invalidation messages, by direction (sent: "
                                "published after a write; received: dropped from this L1)",
                                {"direction"});
      return InvalidationMetrics{
          keys.Get({"sent"}),
          keys.Get({"received"}),
          r.AddCounter("dais_feature_invalidation_publish_errors_total",
                       "Invalidation messages that could not be published (the other "
                       "processes' copies then age out within the L1 TTL)",
                       {})
              .Get({}),
          r.AddCounter("dais_feature_invalidation_bad_messages_total",
                       "Malformed invalidation messages received (ignored)", {})
              .Get({}),
          r.AddCounter("dais_feature_invalidation_resyncs_total",
                       "Whole-L1 drops after (re)subscribing to the invalidation channel "
                       "(messages may have been missed)",
                       {})
              .Get({}),
      };
    }();
    return m;
  }
};

}  // namespace

std::string EncodeInvalidation(const std::vector<std::string_view>& keys) {
  size_t bytes = 0;
  for (auto k : keys) bytes += 4 + k.size();
  std::string out;
  out.reserve(bytes);
  for (auto k : keys) {
    const auto n = static_cast<uint32_t>(k.size());
    char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                   static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.append(len, 4);
    out.append(k);
  }
  return out;
}

Status DecodeInvalidation(std::string_view payload, std::vector<std::string_view>* keys) {
  size_t pos = 0;
  while (pos < payload.size()) {
    if (payload.size() - pos < 4) {
      return InvalidArgument("invalidation message: truncated length at byte " +
                             std::to_string(pos));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(payload.data() + pos);
    const size_t n = size_t{p[0]} | size_t{p[1]} << 8 | size_t{p[2]} << 16 | size_t{p[3]} << 24;
    pos += 4;
    if (payload.size() - pos < n) {
      return InvalidArgument("invalidation message: a key of " + std::to_string(n) +
                             " bytes with " + std::to_string(payload.size() - pos) + " left");
    }
    keys->push_back(payload.substr(pos, n));
    pos += n;
  }
  return OkStatus();
}

PublishingTier::PublishingTier(std::unique_ptr<OnlineTier> inner, Publish publish)
    : inner_(std::move(inner)), publish_(std::move(publish)) {}

void PublishingTier::Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) {
  inner_->Read(std::move(reads), deadline, std::move(cb));
}

void PublishingTier::Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) {
  std::vector<std::string> keys;
  keys.reserve(writes.size());
  for (const auto& w : writes) keys.push_back(w.key);
  inner_->Write(
      std::move(writes), deadline,
      [this, keys = std::move(keys), cb = std::move(cb)](std::vector<StatusOr<bool>> results) {
        std::vector<std::string_view> written;
        for (size_t i = 0; i < keys.size() && i < results.size(); ++i) {
          if (results[i].ok()) written.push_back(keys[i]);
        }
        if (written.empty()) return cb(std::move(results));
        InvalidationMetrics::Get().sent.Increment(static_cast<double>(written.size()));
        // std::function needs a copyable callable: the results go in a shared_ptr.
        auto shared = std::make_shared<std::vector<StatusOr<bool>>>(std::move(results));
        publish_(EncodeInvalidation(written), [cb, shared] { cb(std::move(*shared)); });
      });
}

PublishingTier::Publish RedisPublisher(redis::Client* client) {
  return [client](std::string payload, std::function<void()> done) {
    redis::KeyedCommand c;
    c.command = {"PUBLISH", std::string(kInvalidationChannel), std::move(payload)};
    client->Execute(std::move(c),
                    std::chrono::steady_clock::now() + client->options().command_timeout,
                    [done = std::move(done)](StatusOr<redis::Reply> r) {
                      if (!r.ok() || r->is_error()) {
                        InvalidationMetrics::Get().publish_errors.Increment();
                        LOG_WARNING("feature invalidation not published: {}",
                                    r.ok() ? r->str : std::string(r.status().message()));
                      }
                      done();
                    });
  };
}

StatusOr<std::unique_ptr<InvalidationListener>> InvalidationListener::Start(
    const redis::ClientOptions& options, FeatureStore* store) {
  InvalidationMetrics::Get();
  std::unique_ptr<InvalidationListener> l(new InvalidationListener());
  ASSIGN_OR_RETURN(l->subscriber_, redis::Subscriber::Create(
                                       options, std::string(kInvalidationChannel),
                                       [store, self = l.get()](std::string_view payload) {
                                         std::vector<std::string_view> keys;
                                         Status s = DecodeInvalidation(payload, &keys);
                                         if (!s.ok()) {
                                           InvalidationMetrics::Get().bad_messages.Increment();
                                           LOG_WARNING("feature invalidation: {}", s.message());
                                         }
                                         store->Invalidate(keys);
                                         InvalidationMetrics::Get().received.Increment(
                                             static_cast<double>(keys.size()));
                                         ++self->messages_;
                                       },
                                       [store] {
                                         // Whatever was published while unsubscribed is lost: start
                                         // the L1 over.
                                         store->InvalidateAll();
                                         InvalidationMetrics::Get().resyncs.Increment();
                                       }));
  return l;
}

InvalidationListener::~InvalidationListener() = default;

bool InvalidationListener::subscribed() const { return subscriber_->subscribed(); }

}  // namespace dais::features
