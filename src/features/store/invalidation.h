// Cross-process L1 invalidation over Redis pub/sub (docs/features.md "Consistency").
//
// Every process's L1 keeps records for up to --feature-l1-ttl-ms. A write through one process
// drops the keys from its own L1 at once; without more, the other processes would serve their
// older copy until it ages out. With invalidation on (the default with --redis), the writer
// also PUBLISHes the written keys on kInvalidationChannel, and every `dais serve` subscribed there
// drops them from its L1 (and keeps a read already in flight from putting the older answer back),
// typically within a millisecond on a LAN. When the subscription breaks, messages are lost, so
// each (re)subscription drops the whole L1: a process never serves a copy older than one
// subscription gap plus the TTL.
//
// Writers that publish: `dais serve` (POST /push) and `dais features put|import` (PublishingTier
// around the Redis tier). A program that writes the hashes into Redis by itself does not; its
// writes reach the L1s within the TTL.
//
// Message payload: the record keys (RecordKey), each as a 4-byte little-endian length followed
// by its bytes; one message per tier write batch.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "features/store/online_tier.h"

namespace dais::redis {
class Client;
class Subscriber;
struct ClientOptions;
}  // namespace dais::redis

namespace dais::features {

class FeatureStore;

inline constexpr std::string_view kInvalidationChannel = "dais:feature-invalidation";

std::string EncodeInvalidation(const std::vector<std::string_view>& keys);
// Appends the payload's keys to *keys (views into `payload`). InvalidArgument for a truncated
// payload; the keys before the damage are still appended.
Status DecodeInvalidation(std::string_view payload, std::vector<std::string_view>* keys);

// A tier that publishes the keys of every write batch (those the tier answered without error:
// applied, or refused as older — then the message changes nothing) once the inner tier's write
// completes, and calls the caller back once the message is out (so that a push that returned, or
// a CLI about to exit, has told the other processes). Reads pass through.
class PublishingTier : public OnlineTier {
 public:
  // Sends `payload`, then calls `done` (also when sending failed) on any thread.
  using Publish = std::function<void(std::string payload, std::function<void()> done)>;
  PublishingTier(std::unique_ptr<OnlineTier> inner, Publish publish);

  void Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) override;
  void Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) override;
  bool Healthy() const override { return inner_->Healthy(); }
  const char* name() const override { return inner_->name(); }

 private:
  std::unique_ptr<OnlineTier> inner_;
  Publish publish_;
};

// PUBLISH kInvalidationChannel through `client` (any node); `done` once Redis answered or the
// command failed (counted: the other processes' copies then age out within their TTL).
PublishingTier::Publish RedisPublisher(redis::Client* client);

// Subscribes to kInvalidationChannel and applies what arrives to `store`'s L1.
class InvalidationListener {
 public:
  // Starts subscribing in the background (does not wait for Redis). `store` must outlive it.
  static StatusOr<std::unique_ptr<InvalidationListener>> Start(const redis::ClientOptions& options,
                                                               FeatureStore* store);
  ~InvalidationListener();
  bool subscribed() const;
  // Messages applied so far.
  uint64_t messages() const { return messages_.load(); }

 private:
  InvalidationListener() = default;
  std::atomic<uint64_t> messages_{0};
  std::unique_ptr<redis::Subscriber> subscriber_;
};

}  // namespace dais::features
