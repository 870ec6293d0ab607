#include "redis/script.h"

#include <gtest/gtest.h>

namespace dais::redis {
namespace {

TEST(ScriptTest, Sha1AsRedisComputesIt) {
  Script s("return 1");
  EXPECT_EQ(s.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  EXPECT_EQ(s.source(), "return 1");
  EXPECT_EQ(Sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

}  // namespace
}  // namespace dais::redis
