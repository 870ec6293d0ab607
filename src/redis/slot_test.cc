#include "redis/slot.h"

#include <gtest/gtest.h>

namespace dais::redis {
namespace {

TEST(SlotTest, Crc16Xmodem) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  EXPECT_EQ(Crc16(""), 0);
}

TEST(SlotTest, KeySlotMatchesRedis) {
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot(""), 0);
}

TEST(SlotTest, HashTags) {
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  // Empty tag: the whole key is hashed.
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16("foo{}{bar}") & 16383);
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  // The first '}' after the first '{' closes the tag.
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), Crc16("{bar") & 16383);
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  // No closing brace: the whole key.
  EXPECT_EQ(KeySlot("foo{bar"), Crc16("foo{bar") & 16383);
}

}  // namespace
}  // namespace dais::redis
