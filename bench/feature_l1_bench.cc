// L1 feature cache benchmark: hit ratio against a plain LRU of the same byte budget, and Get
// latency and throughput from 1 and 2 threads. Results go to docs/feature-cache.md.
//
// Workload: Zipf(0.99) keys over 1M entities, 64-byte payloads, capacity for 10% of the
// entities; read-through (Get, and Put on a miss). Each thread draws its own key sequence
// (precomputed, so sampling costs nothing inside the timed loop), warms up, then runs the
// measured requests. One Get in 16 is timed with steady_clock (the timer's own cost, ~20 ns, is
// included in the percentiles; the throughput loop times the whole run).
//
// Usage: feature_l1_bench [requests_per_thread] (default 4000000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "features/cache/cache_testing.h"
#include "features/cache/l1_cache.h"

namespace {

using dais::features::CachedRecord;
using dais::features::L1Cache;
using dais::features::L1Options;
using dais::features::RecordPtr;
namespace testing = dais::features::testing;
using Clock = std::chrono::steady_clock;

constexpr size_t kEntities = 1'000'000;
constexpr double kZipfS = 0.99;
constexpr size_t kPayloadBytes = 64;
constexpr double kCapacityShare = 0.10;
constexpr int kSampleEvery = 16;
constexpr uint64_t kNever = ~uint64_t{0};

struct ThreadResult {
  uint64_t gets = 0;
  uint64_t hits = 0;
  double seconds = 0;
  std::vector<uint32_t> hit_ns;  // sampled hit latencies
};

uint64_t Percentile(std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

// A new record per miss, as a Redis read would make.
RecordPtr MakeRecord() {
  auto record = std::make_shared<CachedRecord>();
  record->found = true;
  record->payload.assign(kPayloadBytes, 'v');
  return record;
}

void RunThread(L1Cache* cache, const std::vector<std::string>* keys,
               const std::vector<uint32_t>* sequence, size_t warmup, ThreadResult* out) {
  auto request = [&](const std::string& k) {
    RecordPtr r = cache->Get(k, 0);
    if (r == nullptr) cache->Put(k, MakeRecord(), kNever, 0);
    return r != nullptr;
  };
  for (size_t i = 0; i < warmup; ++i) request((*keys)[(*sequence)[i]]);
  out->hit_ns.reserve((sequence->size() - warmup) / kSampleEvery + 1);
  auto start = Clock::now();
  for (size_t i = warmup; i < sequence->size(); ++i) {
    const std::string& k = (*keys)[(*sequence)[i]];
    if (i % kSampleEvery == 0) {
      auto t0 = Clock::now();
      RecordPtr r = cache->Get(k, 0);
      auto t1 = Clock::now();
      if (r != nullptr) {
        ++out->hits;
        out->hit_ns.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
      } else {
        cache->Put(k, MakeRecord(), kNever, 0);
      }
    } else {
      out->hits += request(k);
    }
    ++out->gets;
  }
  out->seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t requests = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4'000'000;
  size_t warmup = requests / 2;

  std::vector<std::string> keys(kEntities);
  for (size_t i = 0; i < kEntities; ++i) keys[i] = "user:" + std::to_string(i) + ":profile";
  size_t charge = L1Cache::Charge(keys[kEntities / 2], *MakeRecord());
  size_t capacity = static_cast<size_t>(static_cast<double>(kEntities) * kCapacityShare) * charge;

  testing::Zipf zipf(kEntities, kZipfS);
  std::vector<std::vector<uint32_t>> sequences(2);
  for (size_t t = 0; t < sequences.size(); ++t) {
    std::mt19937_64 rng(1000 + t);
    sequences[t].resize(warmup + requests);
    for (uint32_t& k : sequences[t]) k = static_cast<uint32_t>(zipf(rng));
  }

  // Hit ratio of a plain LRU with the same budget, on thread 0's sequence.
  double lru_ratio = 0;
  {
    testing::ByteLru lru(capacity);
    uint64_t hits = 0;
    for (size_t i = 0; i < sequences[0].size(); ++i) {
      const std::string& k = keys[sequences[0][i]];
      bool hit = lru.Get(k);
      if (!hit) lru.Put(k, charge);
      if (i >= warmup) hits += hit;
    }
    lru_ratio = static_cast<double>(hits) / static_cast<double>(requests);
  }

  std::printf(
      "feature_l1_bench: Zipf(%.2f) over %zu entities, payload %zu B, charge %zu B, "
      "capacity %zu B (%.0f%% of entities), %zu warm-up + %zu measured Gets per thread, "
      "1 in %d timed\n\n",
      kZipfS, kEntities, kPayloadBytes, charge, capacity, kCapacityShare * 100, warmup, requests,
      kSampleEvery);
  std::printf(
      "| threads | hit ratio L1 | hit ratio LRU | hit p50 ns | hit p99 ns | hit p999 ns | "
      "Gets/s per thread |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int threads : {1, 2}) {
    L1Cache cache(L1Options{.capacity_bytes = capacity});
    std::vector<ThreadResult> results(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back(RunThread, &cache, &keys, &sequences[t], warmup, &results[t]);
    }
    for (auto& th : pool) th.join();
    uint64_t gets = 0, hits = 0;
    double rate = 0;
    std::vector<uint32_t> lat;
    for (auto& r : results) {
      gets += r.gets;
      hits += r.hits;
      rate += static_cast<double>(r.gets) / r.seconds;
      lat.insert(lat.end(), r.hit_ns.begin(), r.hit_ns.end());
    }
    std::printf("| %d | %.4f | %.4f | %lu | %lu | %lu | %.2fM |\n", threads,
                static_cast<double>(hits) / static_cast<double>(gets), lru_ratio,
                static_cast<unsigned long>(Percentile(lat, 0.50)),
                static_cast<unsigned long>(Percentile(lat, 0.99)),
                static_cast<unsigned long>(Percentile(lat, 0.999)), rate / threads / 1e6);
    std::fflush(stdout);
    if (cache.bytes() > capacity) {
      std::fprintf(stderr, "bytes %zu over capacity %zu\n", cache.bytes(), capacity);
      return 1;
    }
  }
  return 0;
}
