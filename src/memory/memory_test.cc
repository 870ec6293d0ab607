// Vector memory without a durable store: specs, request parsing and its refusals, the shard's
// write ordering, filters, thresholds, expiry, and search quality against exact search.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <random>

#include "memory/distance.h"
#include "memory/memory_service.h"
#include "memory/snapshot_files.h"

namespace dais::memory {
namespace {

CollectionSpecPtr Spec(const std::string& extra = "") {
  auto spec = ParseCollectionSpec(R"({"name": "items", "dimension": 4, "metric": "l2", )"
                                  R"("payload": {"cat": "string", "price": "number", )"
                                  R"("ok": "bool"})" +
                                  extra + "}");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

Status Wait(const std::function<void(MemoryService::Done)>& op) {
  std::promise<Status> p;
  op([&](Status s) { p.set_value(s); });
  return p.get_future().get();
}

TEST(DistanceTest, EveryKernelThisCpuRunsAgreesWithThePortableOne) {
  const DistanceKernels* portable = DistanceKernelsFor("portable");
  ASSERT_NE(portable, nullptr);
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  int checked = 0;
  for (std::string_view name : {"avx512", "avx2-fma"}) {
    const DistanceKernels* k = DistanceKernelsFor(name);
    if (k == nullptr) continue;  // this CPU lacks it: BestDistanceKernels never picks it
    // Dimensions around the vector widths (the tails) and the usual sizes.
    for (size_t dim : {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 128, 129, 768}) {
      std::vector<float> a(dim), b(dim);
      for (size_t i = 0; i < dim; ++i) a[i] = g(rng), b[i] = g(rng);
      const float want_ip = portable->inner_product_distance(a.data(), b.data(), &dim);
      const float want_l2 = portable->squared_l2(a.data(), b.data(), &dim);
      const float tol = 1e-4f * dim;
      EXPECT_NEAR(k->inner_product_distance(a.data(), b.data(), &dim), want_ip, tol)
          << name << " dim " << dim;
      EXPECT_NEAR(k->squared_l2(a.data(), b.data(), &dim), want_l2, tol) << name << " dim " << dim;
      ++checked;
    }
  }
  std::printf("kernels checked on this CPU: %d dimensions; chosen: %s\n", checked,
              std::string(BestDistanceKernels().name).c_str());
  EXPECT_NE(DistanceKernelsFor(BestDistanceKernels().name), nullptr);
  EXPECT_EQ(DistanceKernelsFor("sse9"), nullptr);
}

// SQ8 codes: every instruction set's int8 kernels give the portable ones' distances, and those
// are within the quantisation's error of the float distances.
TEST(DistanceTest, Sq8KernelsAgreeAndStayNearTheFloatDistances) {
  const DistanceKernels* portable = DistanceKernelsFor("portable");
  std::mt19937 rng(9);
  std::normal_distribution<float> g;
  for (size_t dim : {1, 3, 15, 16, 17, 31, 32, 33, 100, 128, 129, 768}) {
    std::vector<float> a(dim), b(dim);
    for (size_t i = 0; i < dim; ++i) a[i] = g(rng), b[i] = g(rng);
    std::vector<char> ca(Sq8Bytes(dim)), cb(Sq8Bytes(dim));
    Sq8Encode(a.data(), dim, ca.data());
    Sq8Encode(b.data(), dim, cb.data());
    const float ip = portable->inner_product_distance(a.data(), b.data(), &dim);
    const float l2 = portable->squared_l2(a.data(), b.data(), &dim);
    const float sq8_ip = portable->sq8_inner_product_distance(ca.data(), cb.data(), &dim);
    const float sq8_l2 = portable->sq8_squared_l2(ca.data(), cb.data(), &dim);
    // Each code is off by at most half a step (max|x| / 254): the dot product by about
    // sqrt(dim) such errors times the components' size.
    const float tol = 0.05f * std::sqrt(static_cast<float>(dim)) + 0.01f;
    EXPECT_NEAR(sq8_ip, ip, tol) << "dim " << dim;
    EXPECT_NEAR(sq8_l2, l2, 2 * tol) << "dim " << dim;
    for (std::string_view name : {"avx512", "avx2-fma"}) {
      const DistanceKernels* k = DistanceKernelsFor(name);
      if (k == nullptr) continue;
      EXPECT_FLOAT_EQ(k->sq8_inner_product_distance(ca.data(), cb.data(), &dim), sq8_ip)
          << name << " dim " << dim;
      EXPECT_FLOAT_EQ(k->sq8_squared_l2(ca.data(), cb.data(), &dim), sq8_l2)
          << name << " dim " << dim;
    }
  }
  // A zero vector encodes to zeros with scale 0 (no division by zero).
  size_t dim = 8;
  std::vector<float> zero(dim, 0.0f);
  std::vector<char> cz(Sq8Bytes(dim));
  Sq8Encode(zero.data(), dim, cz.data());
  EXPECT_FLOAT_EQ(portable->sq8_inner_product_distance(cz.data(), cz.data(), &dim), 1.0f);
}

TEST(CollectionSpecTest, ParsesAndRoundTrips) {
  auto spec = ParseCollectionSpec(
      R"({"name": "items", "tenant": "shop", "dimension": 128, "metric": "cosine", "shards": 4,
          "ttl": "2h", "payload": {"cat": "string"}, "index": {"m": 8, "ef_search": 40}})");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ((*spec)->ttl, std::chrono::hours(2));
  EXPECT_EQ((*spec)->index.m, 8);
  EXPECT_EQ((*spec)->index.quantization, Quantization::kSq8);  // the default
  auto again = ParseCollectionSpec(CollectionSpecJson(**spec));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(CollectionSpecJson(**again), CollectionSpecJson(**spec));
}

TEST(CollectionSpecTest, RefusalsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"dimension": 4})", "collection name: required"},
      {R"({"name": "x"})", "collection dimension: required"},
      {R"({"name": "x", "dimension": 0})", "collection dimension"},
      {R"({"name": "x", "dimension": 4, "metric": "hamming"})", "collection metric"},
      {R"({"name": "Bad Name", "dimension": 4})", "collection name"},
      {R"({"name": "x", "dimension": 4, "payload": {"a": "date"}})", "collection payload.a"},
      {R"({"name": "x", "dimension": 4, "index": {"m": 1}})", "collection index.m"},
      {R"({"name": "x", "dimension": 4, "index": {"quantization": "pq"}})",
       "collection index.quantization: must be \"sq8\" or \"none\""},
      {R"({"name": "x", "dimension": 4, "ttl": "1y"})", "collection ttl"},
      {R"({"name": "x", "dimension": 4, "shard": 2})", "collection shard: unknown field"},
  };
  for (const auto& [json, want] : cases) {
    auto spec = ParseCollectionSpec(json);
    ASSERT_FALSE(spec.ok()) << json;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(want), std::string::npos)
        << json << " -> " << spec.status().message();
  }
}

TEST(PointTest, RefusesBadRequestsNamingWhat) {
  auto spec = Spec();
  const std::pair<const char*, const char*> upserts[] = {
      {R"({"points": [{"id": "a", "vector": [1, 2, 3]}]})",
       "points[0].vector: has 3 values; collection items has dimension 4"},
      {R"({"points": [{"id": "a", "vector": [1, NaN, 3, 4]}]})", "points[0].vector[1]: NaN"},
      {R"({"points": [{"id": "a", "vector": [1, 1e39, 3, 4]}]})",
       "points[0].vector[1]: not finite"},
      {R"({"points": [{"id": "a", "vector": [1, 2, 3, 4], "payload": {"colour": "red"}}]})",
       "points[0].payload.colour: not a payload field"},
      {R"({"points": [{"id": "a", "vector": [1, 2, 3, 4], "payload": {"price": "x"}}]})",
       "points[0].payload.price: a finite number"},
      {R"({"points": [{"vector": [1, 2, 3, 4]}]})", "points[0].id: required"},
      {R"({"points": []})", "points: an array of 1 to"},
      {R"([1])", "a JSON object is needed"},
  };
  for (const auto& [body, want] : upserts) {
    auto r = ParseUpsert(body, *spec);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << body << " -> " << r.status().message();
  }
  const std::pair<const char*, const char*> searches[] = {
      {R"({"vector": [1, 2, 3, 4], "k": 0})", "k: an integer from 1 to 1000"},
      {R"({"vector": [1, 2, 3, 4], "k": 1000000})", "k: an integer from 1 to 1000"},
      {R"({"vector": [1, 2, 3, 4], "filter": {"colour": "red"}})", "filter.colour: not a payload"},
      {R"({"vector": [1, 2, 3, 4], "filter": {"cat": {"gt": "a"}}})",
       "filter.cat.gt: ranges apply to number fields only"},
      {R"({"vector": [1, 2, 3, 4], "filter": {"price": {"between": 1}}})",
       "filter.price.between: unknown operator"},
      {R"({"vector": [1, 2, 3, 4], "min_score": 0.5})",
       "min_score: collection items uses metric l2"},
      {R"({"k": 3})", "vector: required"},
  };
  for (const auto& [body, want] : searches) {
    auto r = ParseSearch(body, *spec);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << body << " -> " << r.status().message();
  }
}

TEST(PointTest, TheChecksForOtherCodecsApplyTheSameRules) {
  auto spec = Spec();
  Point p{"a", {1, 2, 3, 4}, {{"price", 2.0}, {"cat", std::string("x")}}};
  ASSERT_TRUE(CheckPoint(*spec, &p, "points[0]").ok());
  EXPECT_EQ(p.payload[0].first, "cat");  // sorted
  Point wrong_kind{"a", {1, 2, 3, 4}, {{"price", std::string("cheap")}}};
  EXPECT_NE(CheckPoint(*spec, &wrong_kind, "points[0]").message().find("points[0].payload.price"),
            std::string::npos);
  Point twice{"a", {1, 2, 3, 4}, {{"cat", std::string("x")}, {"cat", std::string("y")}}};
  EXPECT_NE(CheckPoint(*spec, &twice, "p").message().find("given twice"), std::string::npos);
  Point no_id{"", {1, 2, 3, 4}, {}};
  EXPECT_NE(CheckPoint(*spec, &no_id, "p").message().find("p.id"), std::string::npos);
  EXPECT_TRUE(CheckFilter(*spec, {{"price", CompareOp::kLt, 3.0}}).ok());
  EXPECT_NE(CheckFilter(*spec, {{"cat", CompareOp::kGt, std::string("m")}})
                .message()
                .find("ranges apply to number fields only"),
            std::string::npos);
  EXPECT_NE(CheckFilter(*spec, {{"nope", CompareOp::kEq, 1.0}}).message().find("filter[0].field"),
            std::string::npos);
}

TEST(PointTest, TheShardsParameterNamesShardsInRange) {
  EXPECT_TRUE(ParseShardsParam("", 4)->empty());
  EXPECT_TRUE(ParseShardsParam("x=1", 4)->empty());
  EXPECT_EQ(*ParseShardsParam("a=b&shards=0,3", 4), (std::vector<int>{0, 3}));
  for (const char* bad : {"shards=4", "shards=-1", "shards=1x", "shards=1,,2", "shards=,"}) {
    auto r = ParseShardsParam(bad, 4);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("shards"), std::string::npos);
  }
}

TEST(PointTest, CosineNormalisesAndRefusesZero) {
  auto spec = *ParseCollectionSpec(R"({"name": "c", "dimension": 2})");
  std::vector<float> v{3, 4};
  ASSERT_TRUE(CheckVector(*spec, &v, "v").ok());
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  std::vector<float> zero{0, 0};
  EXPECT_NE(CheckVector(*spec, &zero, "v").message().find("zero vector"), std::string::npos);
}

TEST(ShardTest, OlderWritesDoNotWin) {
  Shard shard(Spec(), 0);
  shard.Upsert({{"a", {1, 0, 0, 0}, {}}}, 0, 5);
  shard.Upsert({{"a", {9, 9, 9, 9}, {}}}, 0, 4);  // older: ignored
  shard.Upsert({{"a", {8, 8, 8, 8}, {}}}, 0, 5);  // the same write seen again: ignored
  EXPECT_EQ(shard.Get("a", true, 0)->vector, (std::vector<float>{1, 0, 0, 0}));
  shard.Delete({"a"}, 7, 0);
  shard.Upsert({{"a", {1, 1, 1, 1}, {}}}, 0, 6);  // older than its deletion: ignored
  EXPECT_FALSE(shard.Get("a", false, 0).has_value());
  shard.Delete({"b"}, 9, 0);  // a delete that overtook its upsert
  shard.Upsert({{"b", {1, 1, 1, 1}, {}}}, 0, 8);
  EXPECT_FALSE(shard.Get("b", false, 0).has_value());
  shard.Upsert({{"a", {2, 2, 2, 2}, {}}}, 0, 10);
  EXPECT_TRUE(shard.Get("a", false, 0).has_value());
  EXPECT_EQ(shard.size(), 1u);
}

// The sweep scans only when a point may be due; each point still goes at its own time, and a
// point rewritten without expiry stays.
TEST(ShardTest, ExpireRemovesEachPointAtItsTime) {
  Shard shard(Spec(), 0);
  shard.Upsert({{"never", {1, 0, 0, 0}, {}}}, 0, 1);
  EXPECT_TRUE(shard.Expire(1'000'000).empty());
  shard.Upsert({{"late", {0, 1, 0, 0}, {}}}, 2000, 2);
  shard.Upsert({{"early", {0, 0, 1, 0}, {}}, {"kept", {1, 1, 0, 0}, {}}}, 1000, 3);
  shard.Upsert({{"kept", {1, 1, 0, 0}, {}}}, 0, 4);  // rewritten: no longer expires
  EXPECT_TRUE(shard.Expire(999).empty());
  EXPECT_EQ(shard.Expire(1000), std::vector<std::string>{"early"});
  EXPECT_TRUE(shard.Expire(1999).empty());
  EXPECT_TRUE(shard.Get("late", false, 1999).has_value());
  EXPECT_EQ(shard.Expire(2500), std::vector<std::string>{"late"});
  EXPECT_TRUE(shard.Expire(1'000'000).empty());
  EXPECT_EQ(shard.size(), 2u);  // never, kept
}

TEST(ShardTest, ABatchInsertedInParallelKeepsTheLastVectorOfAnId) {
  Shard shard(Spec(), 0, 16, 2);
  std::vector<Point> batch;
  for (int i = 0; i < 3000; ++i) batch.push_back({std::to_string(i), {float(i), 0, 0, 0}, {}});
  batch.push_back({"7", {-1, -1, -1, -1}, {}});  // the same id again: the last one wins
  shard.Upsert(batch, 0, 1);
  EXPECT_EQ(shard.size(), 3000u);
  EXPECT_EQ(shard.Get("7", true, 0)->vector, (std::vector<float>{-1, -1, -1, -1}));
  SearchRequest r;
  r.vector = {1500.2f, 0, 0, 0};
  r.k = 1;
  EXPECT_EQ(shard.Search(r, 0)[0].id, "1500");
}

TEST(MemoryServiceTest, UpsertSearchFilterDeleteAcrossShards) {
  MemoryService service(nullptr);
  ASSERT_TRUE(service.Create(Spec(R"(, "shards": 3)")).ok());
  std::vector<Point> points;
  for (int i = 0; i < 300; ++i) {
    const float x = static_cast<float>(i);
    points.push_back({"p" + std::to_string(i),
                      {x, 0, 0, 0},
                      {{"cat", i % 2 ? "odd" : "even"}, {"price", static_cast<double>(i)}}});
  }
  ASSERT_TRUE(Wait([&](auto done) { service.Upsert("items", points, done); }).ok());
  SearchRequest r;
  r.vector = {10.2f, 0, 0, 0};
  r.k = 3;
  auto hits = service.Search("items", r);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 3u);
  EXPECT_EQ((*hits)[0].id, "p10");
  EXPECT_EQ((*hits)[1].id, "p11");
  EXPECT_EQ((*hits)[2].id, "p9");
  EXPECT_NEAR((*hits)[0].score, 0.2, 1e-4);

  r.filter = *ParseFilterJson(R"({"cat": "odd", "price": {"gte": 100}})", *Spec());
  hits = service.Search("items", r);
  ASSERT_EQ(hits->size(), 3u);
  EXPECT_EQ((*hits)[0].id, "p101");
  EXPECT_EQ((*hits)[1].id, "p103");

  r.filter.clear();
  r.threshold = 0.9;  // max_distance
  hits = service.Search("items", r);
  EXPECT_EQ(hits->size(), 2u);  // p10 (0.2) and p11 (0.8)

  ASSERT_TRUE(Wait([&](auto done) { service.Delete("items", {"p10", "p11"}, done); }).ok());
  r.threshold.reset();
  hits = service.Search("items", r);
  EXPECT_EQ((*hits)[0].id, "p9");
  auto got = service.Get("items", {"p10", "p12"}, true);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].vector, (std::vector<float>{12, 0, 0, 0}));
  EXPECT_EQ(service.Search("nope", r).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service.Stats()[0].points, 298u);
}

TEST(MemoryServiceTest, SelectiveFilterFallsBackToExactSearch) {
  MemoryService service(nullptr);
  ASSERT_TRUE(service.Create(Spec()).ok());
  std::vector<Point> points;
  for (int i = 0; i < 20000; ++i) {
    points.push_back({std::to_string(i), {static_cast<float>(i), 1, 2, 3}, {{"ok", i == 19999}}});
  }
  ASSERT_TRUE(Wait([&](auto done) { service.Upsert("items", points, done); }).ok());
  SearchRequest r;
  r.vector = {0, 1, 2, 3};
  r.k = 5;
  r.filter = *ParseFilterJson(R"({"ok": true})", *Spec());
  auto hits = service.Search("items", r);
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, "19999");
  EXPECT_EQ(service.Stats()[0].exact_searches, 1u);
}

TEST(MemoryServiceTest, PointsExpireAfterTheTtl) {
  int64_t now = 1'000'000;
  MemoryService service(nullptr, {std::chrono::seconds(1), [&] { return now; }, ""});
  ASSERT_TRUE(service.Create(Spec(R"(, "ttl": "10s")")).ok());
  ASSERT_TRUE(Wait([&](auto d) { service.Upsert("items", {{"a", {1, 2, 3, 4}, {}}}, d); }).ok());
  SearchRequest r;
  r.vector = {1, 2, 3, 4};
  now += 9'999;
  EXPECT_EQ(service.Search("items", r)->size(), 1u);
  now += 1;
  EXPECT_EQ(service.Search("items", r)->size(), 0u);  // hidden at once
  EXPECT_EQ(service.Get("items", {"a"}, false)->size(), 0u);
  service.Sweep();
  EXPECT_EQ(service.Stats()[0].points, 0u);  // and removed by the sweep
}

TEST(MemoryServiceTest, AnEmptyWriteAnswersAtOnce) {
  MemoryService service(nullptr);
  ASSERT_TRUE(service.Create(Spec()).ok());
  EXPECT_TRUE(Wait([&](auto d) { service.Upsert("items", {}, d); }).ok());
  EXPECT_TRUE(Wait([&](auto d) { service.Delete("items", {}, d); }).ok());
}

TEST(MemoryServiceTest, CreateIsIdempotentButRefusesAChange) {
  MemoryService service(nullptr);
  ASSERT_TRUE(service.Create(Spec()).ok());
  EXPECT_TRUE(service.Create(Spec()).ok());
  EXPECT_EQ(service.Create(Spec(R"(, "shards": 2)")).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(service.Drop("items").ok());
  EXPECT_EQ(service.Drop("items").code(), StatusCode::kNotFound);
}

TEST(SnapshotTest, TheColdTierRebuildsACollection) {
  const std::string root = ::testing::TempDir() + "memory_snapshot_test";
  std::filesystem::remove_all(root);
  int64_t now = 1'764'900'000'000;
  {
    MemoryService service(nullptr, {std::chrono::seconds(1), [&] { return now; }, ""});
    ASSERT_TRUE(service.Create(Spec(R"(, "shards": 2, "ttl": "1h")")).ok());
    std::vector<Point> points;
    for (int i = 0; i < 50; ++i) {
      points.push_back({"p" + std::to_string(i),
                        {float(i), 0.5f, 0, 0},
                        {{"cat", "c" + std::to_string(i % 3)}, {"ok", i % 2 == 0}}});
    }
    ASSERT_TRUE(Wait([&](auto d) { service.Upsert("items", points, d); }).ok());
    now += 1000;
    ASSERT_TRUE(Wait([&](auto d) {
                  service.Upsert("items", {{"late", {1, 1, 1, 1}, {}}}, d);
                }).ok());
    ASSERT_TRUE(service.Snapshot(root).ok());
  }
  now += 3'600'000 - 500;  // the first 50 points expired, "late" not yet
  MemoryService restored(nullptr, {std::chrono::seconds(1), [&] { return now; }, ""});
  size_t reported = 0;
  ASSERT_TRUE(
      restored.RestoreFromSnapshots(root, [&](const std::string&, int, size_t n) { reported += n; })
          .ok());
  EXPECT_EQ(reported, 1u);
  EXPECT_EQ(restored.Stats()[0].points, 1u);
  EXPECT_EQ(restored.Stats()[0].spec->shards, 2);
  now -= 2000;  // before the 50 expired: restore again into a fresh service
  MemoryService earlier(nullptr, {std::chrono::seconds(1), [&] { return now; }, ""});
  ASSERT_TRUE(earlier.RestoreFromSnapshots(root).ok());
  EXPECT_EQ(earlier.Stats()[0].points, 51u);
  auto got = earlier.Get("items", {"p7"}, true);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].vector, (std::vector<float>{7, 0.5f, 0, 0}));
  EXPECT_EQ(PayloadJson((*got)[0].payload), R"({"cat":"c1","ok":false})");
  // A collection the service already holds is left alone.
  ASSERT_TRUE(earlier.RestoreFromSnapshots(root).ok());
  EXPECT_EQ(earlier.Stats()[0].points, 51u);
}

TEST(SnapshotTest, ALineRoundTripsAndABadOneIsRefused) {
  auto spec = Spec();
  StoredPoint p{{"a", {0.1f, 1e-30f, -3.25f, 7}, {{"price", 2.5}}}, 123, 9};
  auto back = ParseSnapshotLine(SnapshotLine(p), *spec);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->point.vector, p.point.vector);
  EXPECT_EQ(back->seq, 9u);
  EXPECT_EQ(back->expires_ms, 123);
  EXPECT_FALSE(ParseSnapshotLine(R"({"id": "a", "seq": 1, "vector": [1,2,3,4]})", *spec).ok());
  EXPECT_FALSE(
      ParseSnapshotLine(R"({"id": "a", "seq": 1, "expires_ms": 0, "vector": [1,2]})", *spec).ok());
}

// HNSW recall@10 against exact search on clustered data (the bench measures it at 1M), with the
// graph over SQ8 codes (re-ranked by the floats) and over the floats, for l2 and cosine.
void ExpectRecall(const char* spec_json, Metric metric) {
  constexpr int kDim = 32, kN = 20000, kQueries = 200, kK = 10;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> centres(50, std::vector<float>(kDim));
  for (auto& c : centres)
    for (float& x : c) x = normal(rng) * 4;
  auto sample = [&] {
    std::vector<float> v = centres[rng() % centres.size()];
    for (float& x : v) x += normal(rng);
    if (metric == Metric::kCosine) {
      float n = 0;
      for (float x : v) n += x * x;
      for (float& x : v) x /= std::sqrt(n);
    }
    return v;
  };
  auto spec = *ParseCollectionSpec(spec_json);
  VectorIndex index(kDim, metric, spec->index);
  std::vector<std::vector<float>> data;
  for (int i = 0; i < kN; ++i) {
    data.push_back(sample());
    index.Upsert(i, data.back().data());
  }
  double found = 0;
  for (int q = 0; q < kQueries; ++q) {
    auto query = sample();
    std::vector<std::pair<float, int>> exact;
    for (int i = 0; i < kN; ++i) {
      float d = 0;
      for (int j = 0; j < kDim; ++j) {
        d += metric == Metric::kL2 ? (data[i][j] - query[j]) * (data[i][j] - query[j])
                                   : -data[i][j] * query[j];
      }
      exact.emplace_back(d, i);
    }
    std::partial_sort(exact.begin(), exact.begin() + kK, exact.end());
    auto hits = index.Search(query.data(), kK, {}, 0);
    ASSERT_EQ(hits.size(), static_cast<size_t>(kK));
    // The scores are the float vectors' (re-ranked), best first.
    const float best = metric == Metric::kL2 ? std::sqrt(exact[0].first) : -exact[0].first;
    if (hits[0].label == static_cast<uint64_t>(exact[0].second)) {
      EXPECT_NEAR(hits[0].score, best, 1e-4);
    }
    for (const auto& h : hits) {
      for (int j = 0; j < kK; ++j) found += exact[j].second == static_cast<int>(h.label);
    }
  }
  EXPECT_GE(found / (kQueries * kK), 0.95) << spec_json;
}

TEST(VectorIndexTest, RecallOnClusteredData) {
  ExpectRecall(R"({"name": "r", "dimension": 32, "metric": "l2"})", Metric::kL2);
  ExpectRecall(
      R"({"name": "r", "dimension": 32, "metric": "l2", "index": {"quantization": "none"}})",
      Metric::kL2);
  ExpectRecall(R"({"name": "r", "dimension": 32, "metric": "cosine"})", Metric::kCosine);
}

// Past 8 MiB the index moves its level-0 block to huge-page-advised memory on each growth
// (vector_index.cc): every vector and link must come through the moves intact.
TEST(VectorIndexTest, GrowingPastTheHugePageSizeKeepsEveryPoint) {
  constexpr int kDim = 256, kN = 12000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1, 1);
  VectorIndex index(kDim, Metric::kL2, IndexParams{16, 64, 64, Quantization::kNone}, 16);
  std::vector<std::vector<float>> data(kN, std::vector<float>(kDim));
  for (int i = 0; i < kN; ++i) {
    for (float& x : data[i]) x = uniform(rng);
    index.Upsert(i, data[i].data());
  }
  ASSERT_GT(index.memory_bytes(), size_t{8} << 20);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(index.Vector(i), data[i]) << i;
  for (int i = 0; i < kN; i += 997) {
    auto hits = index.Search(data[i].data(), 1, {}, 0, nullptr, 1000);
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].label, static_cast<uint64_t>(i));
  }
}

}  // namespace
}  // namespace dais::memory
