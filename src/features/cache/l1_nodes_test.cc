#include "features/cache/l1_nodes.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "features/cache/hashed_key.h"

namespace dais::features::l1 {
namespace {

TEST(NodeIndexTest, InsertFindEraseWithTheKeyStoredInTheNode) {
  NodeIndex index;
  EXPECT_EQ(index.Find("a", HashOf("a")), nullptr);
  Node* a = index.Insert("a", HashOf("a"));
  const std::string long_key(300, 'k');
  Node* k = index.Insert(long_key, HashOf(long_key));
  Node* empty = index.Insert("", HashOf(""));
  EXPECT_EQ(a->key(), "a");
  EXPECT_EQ(k->key(), long_key);
  EXPECT_EQ(empty->key(), "");
  EXPECT_EQ(index.Find("a", HashOf("a")), a);
  EXPECT_EQ(index.Find(long_key, HashOf(long_key)), k);
  EXPECT_EQ(index.Find("", HashOf("")), empty);
  EXPECT_EQ(index.size(), 3u);
  index.Erase(a);
  EXPECT_EQ(index.Find("a", HashOf("a")), nullptr);
  EXPECT_EQ(index.Find(long_key, HashOf(long_key)), k);
  EXPECT_EQ(index.size(), 2u);

  // A node of another index: a caller bug, logged; neither index changes.
  NodeIndex other, empty_index;
  Node* foreign = other.Insert("b", HashOf("b"));
  index.Erase(foreign);
  empty_index.Erase(foreign);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(other.Find("b", HashOf("b")), foreign);
}

// Equal hashes (forced collisions): the stored hash matches, so the key decides; erasing from
// the middle of a probe run must keep every later entry findable (backward shift).
TEST(NodeIndexTest, CollidingHashesAndErasureInsideProbeRuns) {
  NodeIndex index;
  std::vector<Node*> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(index.Insert("key" + std::to_string(i), 7));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(index.Find("key" + std::to_string(i), 7), nodes[i]);
  EXPECT_EQ(index.Find("key6", 7), nullptr);
  index.Erase(nodes[2]);
  index.Erase(nodes[0]);
  for (int i : {1, 3, 4, 5}) EXPECT_EQ(index.Find("key" + std::to_string(i), 7), nodes[i]) << i;
  EXPECT_EQ(index.Find("key0", 7), nullptr);
  EXPECT_EQ(index.Find("key2", 7), nullptr);
}

// A random mix of inserts and erases over a small key space with few distinct hash values (long
// runs that wrap around the end of the table), checked against std::map after every step.
TEST(NodeIndexTest, RandomOperationsMatchAMap) {
  NodeIndex index;
  std::map<std::string, Node*> model;
  std::mt19937 rng(11);
  for (int step = 0; step < 20000; ++step) {
    const int id = static_cast<int>(rng() % 300);
    const std::string key = "entity=" + std::to_string(id);
    // Hashes cluster on a few home slots near the top of any table size.
    const uint64_t hash = (HashOf(key) % 5) + (uint64_t{1} << 40) - 3;
    Node* found = index.Find(key, hash);
    auto it = model.find(key);
    ASSERT_EQ(found, it == model.end() ? nullptr : it->second) << "step " << step;
    if (found == nullptr) {
      model[key] = index.Insert(key, hash);
    } else if (rng() % 2 == 0) {
      index.Erase(found);
      model.erase(it);
    }
    ASSERT_EQ(index.size(), model.size());
    ASSERT_LE(2 * index.size(), index.slots());
  }
  for (const auto& [key, node] : model) {
    EXPECT_EQ(index.Find(key, (HashOf(key) % 5) + (uint64_t{1} << 40) - 3), node);
  }
  index.Clear();
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.Find(model.begin()->first, 0), nullptr);
}

}  // namespace
}  // namespace dais::features::l1
