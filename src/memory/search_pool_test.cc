// The search threads: one queue, first in first out, bounded, drained when the pool ends; and
// MemoryService::SearchAsync on them (the same answers as Search, the deadline counted from
// the request's arrival, refusals when the queue is full).
#include "memory/search_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "memory/memory_service.h"

namespace dais::memory {
namespace {

TEST(SearchPoolTest, RunsEveryTaskOnceInOrderAndRefusesPastTheBound) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<int> order;
  std::atomic<bool> blocking{false};
  {
    SearchPool pool(1, /*max_queued=*/3, "test-search");
    // The one thread holds the first task until released: the next ones queue.
    ASSERT_TRUE(pool.Post([&] {
      blocking = true;
      released.wait();
    }));
    while (!blocking) std::this_thread::yield();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Post([&order, i] { order.push_back(i); }));
    EXPECT_EQ(pool.queued(), 3u);
    EXPECT_FALSE(pool.Post([&order] { order.push_back(99); })) << "past max_queued";
    release.set_value();
  }  // the destructor runs what is queued, then joins
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

CollectionSpecPtr Spec() {
  auto spec = ParseCollectionSpec(R"({"name": "items", "dimension": 4, "metric": "l2"})");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

StatusOr<std::vector<SearchHit>> SearchOn(const MemoryService& service, SearchRequest r,
                                          std::thread::id* ran_on = nullptr) {
  std::promise<StatusOr<std::vector<SearchHit>>> p;
  service.SearchAsync("items", std::move(r), [&](StatusOr<std::vector<SearchHit>> hits) {
    if (ran_on != nullptr) *ran_on = std::this_thread::get_id();
    p.set_value(std::move(hits));
  });
  return p.get_future().get();
}

TEST(SearchPoolTest, SearchAsyncAnswersAsSearchOnASearchThread) {
  for (const int threads : {0, 2}) {
    SCOPED_TRACE(threads);
    MemoryOptions options;
    options.search_threads = threads;
    MemoryService service(nullptr, options);
    ASSERT_TRUE(service.Create(Spec()).ok());
    std::vector<Point> points;
    for (int i = 0; i < 100; ++i)
      points.push_back({"p" + std::to_string(i), {float(i), 0, 0, 0}, {}});
    std::promise<Status> stored;
    service.Upsert("items", points, [&](Status s) { stored.set_value(s); });
    ASSERT_TRUE(stored.get_future().get().ok());
    SearchRequest r;
    r.vector = {10.2f, 0, 0, 0};
    r.k = 3;
    std::thread::id ran_on;
    auto hits = SearchOn(service, r, &ran_on);
    ASSERT_TRUE(hits.ok()) << hits.status().message();
    auto direct = service.Search("items", r);
    ASSERT_EQ(hits->size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*hits)[i].id, (*direct)[i].id);
    EXPECT_EQ((*hits)[0].id, "p10");
    EXPECT_EQ(ran_on == std::this_thread::get_id(), threads == 0);
    // An unknown collection is refused the same way.
    std::promise<Status> refused;
    service.SearchAsync("nope", r, [&](auto h) { refused.set_value(h.status()); });
    EXPECT_EQ(refused.get_future().get().code(), StatusCode::kNotFound);
  }
}

TEST(SearchPoolTest, TheDeadlineCountsFromTheRequestsArrival) {
  MemoryOptions options;
  options.search_threads = 1;
  MemoryService service(nullptr, options);
  ASSERT_TRUE(service.Create(Spec()).ok());
  SearchRequest r;
  r.vector = {1, 0, 0, 0};
  r.timeout_ms = 50;
  r.received = std::chrono::steady_clock::now() - std::chrono::milliseconds(60);  // queued long
  auto hits = SearchOn(service, r);
  ASSERT_FALSE(hits.ok());
  EXPECT_EQ(hits.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(hits.status().message().find("timeout_ms 50"), std::string::npos)
      << hits.status().message();
  r.received = {};
  EXPECT_TRUE(SearchOn(service, r).ok()) << "arrived now: within its 50 ms";
}

TEST(SearchPoolTest, SearchAsyncRefusesWhenTheQueueIsFull) {
  MemoryOptions options;
  options.search_threads = 1;
  options.max_queued_searches = 0;  // every search refused: the queue is always full
  MemoryService service(nullptr, options);
  ASSERT_TRUE(service.Create(Spec()).ok());
  SearchRequest r;
  r.vector = {1, 0, 0, 0};
  auto hits = SearchOn(service, r);
  ASSERT_FALSE(hits.ok());
  EXPECT_EQ(hits.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(hits.status().message().find("waiting for a search thread"), std::string::npos);
}

}  // namespace
}  // namespace dais::memory
