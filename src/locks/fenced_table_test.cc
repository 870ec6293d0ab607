// FencedTable and the lock vocabulary (pure, no Redis).
#include "locks/fenced_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/status_testing.h"
#include "locks/lock_metrics.h"
#include "locks/lock_scripts.h"

namespace dais::locks {
namespace {

TEST(FencedTableTest, AcceptsEqualAndHigherRejectsLower) {
  FencedTable table(LockLevel::kNode);
  auto& rejections = internal::LockMetrics::For(LockLevel::kNode).fencing_rejections;
  const double before = rejections.Value();
  EXPECT_EQ(table.Highest("m"), 0);
  EXPECT_OK(table.Check("m", 10));
  EXPECT_OK(table.Check("m", 10));  // same holder, second operation
  EXPECT_OK(table.Check("m", 12));
  Status stale = table.Check("m", 11);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("stale fencing token 11"), std::string::npos);
  EXPECT_EQ(table.Highest("m"), 12);
  EXPECT_OK(table.Check("other", 1));  // keys are independent
  EXPECT_EQ(rejections.Value(), before + 1);
}

TEST(FencedTableTest, ApplyRunsTheEffectOnlyWhenAccepted) {
  FencedTable table;
  int active = 0;
  EXPECT_OK(table.Apply("m", 5, [&] { active = 5; }));
  EXPECT_FALSE(table.Apply("m", 4, [&] { active = 4; }).ok());
  EXPECT_EQ(active, 5);
  EXPECT_OK(table.Apply("m", 7, [&] { active = 7; }));
  EXPECT_EQ(active, 7);
}

TEST(FencedTableTest, ConcurrentAppliesKeepTheHighestToken) {
  FencedTable table;
  int64_t effect = 0;  // written only inside Apply (under the table's mutex)
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 1; i <= 1000; ++i) {
        const int64_t token = i * 4 + t;
        (void)table.Apply("m", token, [&] {
          EXPECT_GE(token, effect);
          effect = token;
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.Highest("m"), 4003);
  EXPECT_EQ(effect, 4003);
}

TEST(LockResourceTest, NamesKeysAndValidation) {
  EXPECT_EQ(LockResource::Model("m").Name(), "model");
  EXPECT_EQ(LockResource::Version("m", "3").Name(), "version:3");
  EXPECT_EQ(LockResource::Version("m", "3", "n1").Name(), "version:3@n1");
  EXPECT_EQ(LockResource::Node("m", "n1").Name(), "node:n1");
  const internal::LockKeys k = internal::KeysFor(LockResource::Version("m", "3", "n1"));
  EXPECT_EQ(k.lock, "dais:lock:{m}:version:3@n1");
  EXPECT_EQ(k.intents, "dais:lock:{m}:intents");
  EXPECT_EQ(k.fence, "dais:lock:{m}:fence");
  EXPECT_EQ(k.member, "version:3@n1");
  EXPECT_EQ(internal::KeysFor(LockResource::Model("m")).member, "");
  EXPECT_EQ(internal::LevelOfName("node:x"), LockLevel::kNode);
  EXPECT_OK(ValidateResource(LockResource::Version("m", "3", "n1")));
  EXPECT_FALSE(ValidateResource(LockResource::Model("")).ok());
  EXPECT_FALSE(ValidateResource(LockResource::Model("a{b}")).ok());
  EXPECT_FALSE(ValidateResource(LockResource::Model("a b")).ok());
  EXPECT_FALSE(ValidateResource(LockResource::Version("m", "")).ok());
  EXPECT_FALSE(ValidateResource(LockResource::Version("m", "1@2")).ok());
  EXPECT_FALSE(ValidateResource(LockResource::Node("m", "")).ok());
}

}  // namespace
}  // namespace dais::locks
