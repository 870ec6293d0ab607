#include "features/cache/l1_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "features/cache/cache_testing.h"
#include "features/cache/frequency_sketch.h"

namespace dais::features {
namespace {

constexpr uint64_t kNever = ~uint64_t{0};

RecordPtr MakeRecord(std::string payload, bool found = true, int64_t event_time_us = 0) {
  auto r = std::make_shared<CachedRecord>();
  r->found = found;
  r->event_time_us = event_time_us;
  r->payload = std::move(payload);
  return r;
}

std::string Key(size_t i) { return "entity:" + std::to_string(i); }

TEST(FrequencySketchTest, CountsSaturateAndAge) {
  FrequencySketch sketch(1024, 100000);
  const uint64_t hot = 0x1234, cold = 0x9876;
  for (int i = 0; i < 5; ++i) sketch.Increment(hot);
  EXPECT_EQ(sketch.Estimate(hot), 5);
  EXPECT_EQ(sketch.Estimate(cold), 0);
  for (int i = 0; i < 100; ++i) sketch.Increment(hot);
  EXPECT_EQ(sketch.Estimate(hot), FrequencySketch::kMaxCount);

  FrequencySketch aging(64, 20);
  for (int i = 0; i < 12; ++i) aging.Increment(hot);
  EXPECT_EQ(aging.Estimate(hot), 12);
  for (int i = 0; i < 8; ++i) aging.Increment(cold + static_cast<uint64_t>(i) * 7919);
  EXPECT_EQ(aging.agings(), 1u);  // 20 additions: every counter halved
  EXPECT_EQ(aging.Estimate(hot), 6);
}

TEST(L1CacheTest, HitAndMiss) {
  L1Cache cache(L1Options{.capacity_bytes = 1 << 20, .shards = 4});
  EXPECT_EQ(cache.Get("a", 0), nullptr);
  EXPECT_TRUE(cache.Put("a", MakeRecord("va", true, 42), kNever, 0));
  RecordPtr r = cache.Get("a", 1);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->found);
  EXPECT_EQ(r->event_time_us, 42);
  EXPECT_EQ(r->payload, "va");
  EXPECT_EQ(cache.Get("b", 1), nullptr);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), L1Cache::Charge("a", *r));

  cache.Erase("a");
  EXPECT_EQ(cache.Get("a", 2), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.entries(), 0u);
  // The record handed out stays valid after the entry is gone.
  EXPECT_EQ(r->payload, "va");
}

TEST(L1CacheTest, DeadlineExpiry) {
  L1Cache cache(L1Options{.capacity_bytes = 1 << 20, .shards = 1});
  ASSERT_TRUE(cache.Put("k", MakeRecord("v"), /*deadline_ns=*/1000, /*now_ns=*/100));
  EXPECT_NE(cache.Get("k", 999), nullptr);
  EXPECT_EQ(cache.Get("k", 1000), nullptr);  // now == deadline: expired
  EXPECT_EQ(cache.entries(), 0u);            // dropped
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.expirations(), 1u);
  EXPECT_EQ(cache.Get("k", 500), nullptr);  // gone for good, even with an earlier clock

  // A Put whose deadline already passed stores nothing and drops the previous value.
  ASSERT_TRUE(cache.Put("k", MakeRecord("old"), 5000, 2000));
  EXPECT_FALSE(cache.Put("k", MakeRecord("new"), 2500, 3000));
  EXPECT_EQ(cache.Get("k", 3000), nullptr);
  EXPECT_FALSE(cache.Put("k", nullptr, 5000, 3000));
}

TEST(L1CacheTest, NegativeEntries) {
  L1Cache cache(L1Options{.capacity_bytes = 1 << 20, .shards = 2});
  ASSERT_TRUE(cache.Put("missing", MakeRecord("", /*found=*/false), kNever, 0));
  RecordPtr r = cache.Get("missing", 1);
  ASSERT_NE(r, nullptr);  // a hit: the cache remembers that Redis has no such record
  EXPECT_FALSE(r->found);
  EXPECT_EQ(cache.bytes(), std::string_view("missing").size() + L1Cache::kEntryOverheadBytes);
}

TEST(L1CacheTest, ReplacementUpdatesBytes) {
  L1Cache cache(L1Options{.capacity_bytes = 1 << 20, .shards = 1});
  ASSERT_TRUE(cache.Put("k", MakeRecord(std::string(100, 'x')), kNever, 0));
  EXPECT_EQ(cache.bytes(), 1 + 100 + L1Cache::kEntryOverheadBytes);
  ASSERT_TRUE(cache.Put("k", MakeRecord(std::string(10, 'y')), kNever, 0));
  EXPECT_EQ(cache.bytes(), 1 + 10 + L1Cache::kEntryOverheadBytes);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.Get("k", 0)->payload, std::string(10, 'y'));
  // Grow it.
  ASSERT_TRUE(cache.Put("k", MakeRecord(std::string(1000, 'z')), kNever, 0));
  EXPECT_EQ(cache.bytes(), 1 + 1000 + L1Cache::kEntryOverheadBytes);
  cache.Clear();
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(L1CacheTest, OversizedEntryIsRejectedAndDropsOldValue) {
  L1Cache cache(L1Options{.capacity_bytes = 4096, .shards = 4});  // 1 KiB per shard
  ASSERT_TRUE(cache.Put("k", MakeRecord("small"), kNever, 0));
  EXPECT_FALSE(cache.Put("k", MakeRecord(std::string(2000, 'x')), kNever, 0));
  EXPECT_EQ(cache.Get("k", 0), nullptr);
  EXPECT_EQ(cache.rejections(), 1u);
  EXPECT_EQ(cache.bytes(), 0u);
}

// A key that is read often survives a scan of one-hit keys (the point of TinyLFU admission).
TEST(L1CacheTest, FrequentKeySurvivesScan) {
  L1Cache cache(L1Options{.capacity_bytes = 20 * 200, .shards = 1});
  const std::string payload(100, 'p');
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 10; ++i) {
      if (cache.Get(Key(i), 0) == nullptr) cache.Put(Key(i), MakeRecord(payload), kNever, 0);
    }
  }
  for (int i = 1000; i < 5000; ++i) {
    if (cache.Get(Key(i), 0) == nullptr) cache.Put(Key(i), MakeRecord(payload), kNever, 0);
  }
  int hot_hits = 0;
  for (int i = 0; i < 10; ++i) hot_hits += cache.Get(Key(i), 0) != nullptr;
  EXPECT_EQ(hot_hits, 10);
  EXPECT_GT(cache.rejections(), 3000u);
  EXPECT_LE(cache.bytes(), 20u * 200);
}

TEST(L1CacheTest, BytesBoundHoldsUnderRandomWorkload) {
  const size_t capacity = 64 * 1024;
  L1Cache cache(L1Options{.capacity_bytes = capacity, .shards = 8});
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> op(0, 99);
  std::uniform_int_distribution<size_t> key(0, 5000);
  std::uniform_int_distribution<size_t> size(0, 900);
  uint64_t now = 0;
  for (int i = 0; i < 200000; ++i) {
    now += 10;
    int o = op(rng);
    std::string k = Key(key(rng));
    if (o < 60) {
      (void)cache.Get(k, now);
    } else if (o < 95) {
      uint64_t deadline = now + 1 + rng() % 20000;
      cache.Put(k, MakeRecord(std::string(size(rng), 'x'), o % 2 == 0), deadline, now);
    } else if (o < 99) {
      cache.Erase(k);
    } else if (i % 1000 == 0) {
      cache.Clear();
    }
    if (i % 97 == 0) {
      ASSERT_LE(cache.bytes(), capacity) << "op " << i;
    }
  }
  EXPECT_LE(cache.bytes(), capacity);
  EXPECT_GT(cache.evictions() + cache.rejections(), 0u);
  EXPECT_GT(cache.expirations(), 0u);
}

struct HitRatios {
  double l1;
  double lru;
};

// Read-through workload: Get, and on a miss Put. Both caches see the same key sequence.
HitRatios RunZipf(size_t keys, double s, double capacity_share, size_t payload_bytes,
                  size_t requests, int shards) {
  const std::string payload(payload_bytes, 'v');
  size_t charge = Key(keys / 2).size() + payload_bytes + L1Cache::kEntryOverheadBytes;
  size_t capacity = static_cast<size_t>(static_cast<double>(keys) * capacity_share) * charge;
  L1Cache cache(L1Options{.capacity_bytes = capacity, .shards = shards});
  testing::ByteLru lru(capacity);
  testing::Zipf zipf(keys, s);
  std::mt19937_64 rng(42);
  RecordPtr record = MakeRecord(payload);
  size_t l1_hits = 0, lru_hits = 0, counted = 0;
  for (size_t i = 0; i < requests; ++i) {
    std::string k = Key(zipf(rng));
    bool measured = i >= requests / 5;  // the first 20% warm both caches
    counted += measured;
    if (cache.Get(k, 0) != nullptr) {
      l1_hits += measured;
    } else {
      cache.Put(k, record, kNever, 0);
    }
    if (lru.Get(k)) {
      lru_hits += measured;
    } else {
      lru.Put(k, L1Cache::Charge(k, *record));
    }
  }
  EXPECT_LE(cache.bytes(), capacity);
  EXPECT_LE(lru.bytes(), capacity);
  return {static_cast<double>(l1_hits) / static_cast<double>(counted),
          static_cast<double>(lru_hits) / static_cast<double>(counted)};
}

TEST(L1CacheTest, ZipfHitRatioBeatsLru) {
  // Zipf(1.0) over 100k keys, room for 2% of them, default sharding.
  HitRatios r = RunZipf(100000, 1.0, 0.02, 64, 2000000, 64);
  std::printf("Zipf(1.0) 100k keys, capacity 2%%, 64 shards: L1 hit ratio %.4f, LRU %.4f\n", r.l1,
              r.lru);
  EXPECT_GE(r.l1, r.lru);
  HitRatios one = RunZipf(100000, 1.0, 0.02, 64, 2000000, 1);
  std::printf("Zipf(1.0) 100k keys, capacity 2%%, 1 shard:   L1 hit ratio %.4f, LRU %.4f\n", one.l1,
              one.lru);
  EXPECT_GE(one.l1, one.lru);
}

TEST(L1CacheTest, ConcurrentGetPut) {
  const size_t capacity = 256 * 1024;
  L1Cache cache(L1Options{.capacity_bytes = capacity, .shards = 16});
  std::atomic<uint64_t> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      testing::Zipf zipf(20000, 0.9);
      uint64_t local_hits = 0;
      for (uint64_t i = 0; i < 50000; ++i) {
        std::string k = Key(zipf(rng));
        RecordPtr r = cache.Get(k, i);
        if (r != nullptr) {
          ++local_hits;
          // Read the shared record while other threads replace and evict it.
          EXPECT_EQ(r->payload.size() % 8, 0u);
        } else if (i % 7 == 0) {
          cache.Erase(k);
        } else {
          cache.Put(k, MakeRecord(std::string(8 * (i % 16), 'x')), i + 100000, i);
        }
      }
      hits += local_hits;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.bytes(), capacity);
  EXPECT_GT(hits.load(), 0u);
}

}  // namespace
}  // namespace dais::features
