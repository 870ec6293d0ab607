#include "features/cache/heavy_hitters.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/status_testing.h"
#include "features/cache/cache_testing.h"

namespace dais::features {
namespace {

std::string Key(size_t i) { return "user:" + std::to_string(i); }

struct Stream {
  std::vector<std::string> keys;
  std::map<std::string, uint64_t> truth;
};

Stream ZipfStream(size_t distinct, double s, size_t length, uint64_t seed) {
  Stream st;
  testing::Zipf zipf(distinct, s);
  std::mt19937_64 rng(seed);
  st.keys.reserve(length);
  for (size_t i = 0; i < length; ++i) {
    st.keys.push_back(Key(zipf(rng)));
    ++st.truth[st.keys.back()];
  }
  return st;
}

std::vector<std::pair<std::string, uint64_t>> TrueTop(const Stream& st, size_t n) {
  std::vector<std::pair<std::string, uint64_t>> all(st.truth.begin(), st.truth.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  all.resize(std::min(n, all.size()));
  return all;
}

TEST(HeavyHittersTest, ExactTopKOnSkewedStream) {
  Stream st = ZipfStream(50000, 1.2, 500000, 1);
  HeavyHitters hh(1000);
  for (const std::string& k : st.keys) hh.Offer(k);
  auto want = TrueTop(st, 20);
  auto got = hh.Top(20);
  ASSERT_EQ(got.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i].key, want[i].first) << "rank " << i;
    // The head of a skewed stream enters early and is never displaced: counted exactly.
    EXPECT_EQ(got[i].count, want[i].second) << got[i].key;
    EXPECT_EQ(got[i].error, 0u) << got[i].key;
  }
  EXPECT_LE(hh.size(), 1000u);
}

TEST(HeavyHittersTest, ErrorBoundsHold) {
  const size_t kCapacity = 200;
  const size_t kLength = 300000;
  Stream st = ZipfStream(100000, 0.8, kLength, 2);  // a long tail: many displacements
  HeavyHitters hh(kCapacity, /*shards=*/1);
  for (const std::string& k : st.keys) hh.Offer(k);
  auto items = hh.Top(kCapacity);
  ASSERT_EQ(items.size(), kCapacity);
  uint64_t sum = 0, min_count = ~uint64_t{0};
  for (const auto& item : items) {
    uint64_t truth = st.truth.count(item.key) ? st.truth.at(item.key) : 0;
    EXPECT_LE(item.count - item.error, truth) << item.key;
    EXPECT_GE(item.count, truth) << item.key;
    sum += item.count;
    min_count = std::min(min_count, item.count);
  }
  EXPECT_EQ(sum, kLength);  // Space-Saving keeps the total
  EXPECT_LE(min_count, kLength / kCapacity);
  // Every key more frequent than the minimum is monitored.
  std::map<std::string, bool> monitored;
  for (const auto& item : items) monitored[item.key] = true;
  for (const auto& [key, count] : st.truth) {
    if (count > min_count) {
      EXPECT_TRUE(monitored.count(key)) << key << " " << count;
    }
  }
}

TEST(HeavyHittersTest, ShardedBoundsHoldPerItem) {
  Stream st = ZipfStream(100000, 0.9, 200000, 3);
  HeavyHitters hh(1024, 8);
  EXPECT_EQ(hh.shards(), 8);
  for (const std::string& k : st.keys) hh.Offer(k);
  for (const auto& item : hh.Top(1024)) {
    uint64_t truth = st.truth.count(item.key) ? st.truth.at(item.key) : 0;
    EXPECT_LE(item.count - item.error, truth);
    EXPECT_GE(item.count, truth);
  }
  auto want = TrueTop(st, 10);
  auto got = hh.Top(10);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(got[i].key, want[i].first);
}

TEST(HeavyHittersTest, WeightedOfferAndInvalidKeys) {
  HeavyHitters hh(4, 1);
  hh.Offer("a", 10);
  hh.Offer("b", 3);
  hh.Offer("a");
  hh.Offer("bad\tkey");
  hh.Offer("bad\nkey");
  hh.Offer("zero", 0);
  EXPECT_EQ(hh.rejected_keys(), 2u);
  auto top = hh.Top(10);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0], (HeavyHitters::Item{"a", 11, 0}));
  EXPECT_EQ(top[1], (HeavyHitters::Item{"b", 3, 0}));
  hh.Reset();
  EXPECT_TRUE(hh.Top(10).empty());
  EXPECT_EQ(hh.size(), 0u);
}

TEST(HeavyHittersTest, DisplacementInheritsMinimum) {
  HeavyHitters hh(2, 1);
  hh.Offer("a", 5);
  hh.Offer("b", 2);
  hh.Offer("c", 1);  // displaces b (2): count 3, error 2
  auto top = hh.Top(2);
  EXPECT_EQ(top[0], (HeavyHitters::Item{"a", 5, 0}));
  EXPECT_EQ(top[1], (HeavyHitters::Item{"c", 3, 2}));
}

TEST(HeavyHittersTest, SerializeParseRoundtrip) {
  HeavyHitters hh(100, 4);
  hh.Offer("user:1", 50);
  hh.Offer("user:2", 20);
  hh.Offer(std::string("bin\0ary\r\x01 key", 14), 7);
  hh.Offer("", 3);  // the empty key is a key
  std::string text = hh.Serialize(10);
  EXPECT_EQ(text.substr(0, text.find('\n')), HeavyHitters::kHeader);
  EXPECT_NE(text.find("50\t0\tuser:1\n"), std::string::npos);
  auto parsed = HeavyHitters::Parse(text);
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, hh.Top(10));

  // Truncated to top_n; a missing final newline is accepted.
  std::string two = hh.Serialize(2);
  two.pop_back();
  auto p2 = HeavyHitters::Parse(two);
  ASSERT_OK(p2);
  ASSERT_EQ(p2->size(), 2u);
  EXPECT_EQ((*p2)[1].key, "user:2");

  auto empty = HeavyHitters::Parse(HeavyHitters(10).Serialize(10));
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(HeavyHittersTest, ParseErrorsNameTheLine) {
  const std::string h = std::string(HeavyHitters::kHeader) + "\n";
  struct Case {
    std::string text;
    std::string want;
  };
  const Case cases[] = {
      {"", "line 1"},
      {"# something else\n1\t0\tk\n", "line 1: expected header"},
      {h + "5\t0\ta\nnot a line\n", "line 3: expected"},
      {h + "5\t0\ta\n6\t0\n", "line 3: expected"},
      {h + "x\t0\ta\n", "line 2: count is not a uint64"},
      {h + "-1\t0\ta\n", "line 2: count"},
      {h + "1\t0x\ta\n", "line 2: error is not a uint64"},
      {h + "18446744073709551616\t0\ta\n", "line 2: count"},
      {h + "1\t2\ta\n", "line 2: error exceeds count"},
      {h + "1\t0\ta\tb\n", "line 2: key contains a tab"},
      {h + "1\t0\ta\n2\t0\tb\n3\t0\ta\n", "line 4: duplicate key"},
      {h + "1\t0\ta\n\n", "line 3: expected"},
  };
  for (const Case& c : cases) {
    auto r = HeavyHitters::Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << r.status().message() << " / want " << c.want;
  }
}

TEST(HeavyHittersTest, MergeKeepsBounds) {
  // Two nodes see different halves of one stream; the merged summary bounds the whole.
  Stream st = ZipfStream(20000, 1.0, 200000, 4);
  HeavyHitters a(300, 1), b(300, 1);
  for (size_t i = 0; i < st.keys.size(); ++i) (i % 2 ? a : b).Offer(st.keys[i]);
  auto b_items = HeavyHitters::Parse(b.Serialize(300));
  ASSERT_OK(b_items);
  a.Merge(*b_items);
  auto merged = a.Top(300);
  ASSERT_EQ(merged.size(), 300u);
  for (const auto& item : merged) {
    uint64_t truth = st.truth.count(item.key) ? st.truth.at(item.key) : 0;
    EXPECT_LE(item.count - item.error, truth) << item.key;
    EXPECT_GE(item.count, truth) << item.key;
  }
  auto want = TrueTop(st, 10);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(merged[i].key, want[i].first) << i;
    EXPECT_EQ(merged[i].count, want[i].second) << i;
  }

  HeavyHitters c(10, 1);
  c.Offer("x", 4);
  c.Merge({{"x", 6, 1}, {"y", 2, 0}, {"bad\tkey", 1, 0}});
  auto top = c.Top(10);
  EXPECT_EQ(top[0], (HeavyHitters::Item{"x", 10, 1}));
  EXPECT_EQ(top[1], (HeavyHitters::Item{"y", 2, 0}));
  EXPECT_EQ(c.rejected_keys(), 1u);
}

TEST(HeavyHittersTest, ConcurrentOffers) {
  HeavyHitters hh(4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&hh, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      testing::Zipf zipf(10000, 1.0);
      for (int i = 0; i < 50000; ++i) hh.Offer(Key(zipf(rng)));
    });
  }
  for (auto& th : threads) th.join();
  uint64_t sum = 0;
  for (const auto& item : hh.Top(4096)) sum += item.count;
  EXPECT_EQ(sum, 4u * 50000);
  EXPECT_EQ(hh.Top(1)[0].key, "user:0");
}

// Not an assertion: prints Offer's cost so regressions are visible in the test log.
TEST(HeavyHittersTest, OfferCost) {
  Stream st = ZipfStream(1000000, 0.99, 1000000, 5);
  HeavyHitters hh(10000);
  auto start = std::chrono::steady_clock::now();
  for (const std::string& k : st.keys) hh.Offer(k);
  auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("HeavyHitters(10000, %d shards) Offer, Zipf(0.99) over 1M keys: %.1f ns/op\n",
              hh.shards(), static_cast<double>(ns) / static_cast<double>(st.keys.size()));
}

}  // namespace
}  // namespace dais::features
