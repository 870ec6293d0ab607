#include "redis/topology.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"
#include "redis/options.h"

namespace dais::redis {
namespace {

Reply Node(std::string host, int64_t port, std::string id) {
  return Reply::Array({Reply::Bulk(std::move(host)), Reply::Integer(port), Reply::Bulk(id)});
}

TEST(TopologyTest, ParsesClusterSlots) {
  Reply r = Reply::Array({
      Reply::Array({Reply::Integer(0), Reply::Integer(5460), Node("10.0.0.1", 7000, "a"),
                    Node("10.0.0.4", 7003, "d")}),
      Reply::Array({Reply::Integer(5461), Reply::Integer(16383), Node("", 7001, "b")}),
  });
  StatusOr<SlotMap> map = ParseClusterSlots(r, "10.0.0.9");
  ASSERT_OK(map);
  EXPECT_EQ(map->masters, (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.9:7001"}));
  EXPECT_EQ(*map->Owner(0), "10.0.0.1:7000");
  EXPECT_EQ(*map->Owner(5460), "10.0.0.1:7000");
  EXPECT_EQ(*map->Owner(5461), "10.0.0.9:7001");
  EXPECT_EQ(map->covered(), 16384u);
}

TEST(TopologyTest, RejectsMalformedClusterSlots) {
  EXPECT_FALSE(ParseClusterSlots(Reply::Status("OK"), "h").ok());
  EXPECT_FALSE(ParseClusterSlots(Reply::Array({Reply::Array({Reply::Integer(5)})}), "h").ok());
  EXPECT_FALSE(
      ParseClusterSlots(
          Reply::Array({Reply::Array({Reply::Integer(9), Reply::Integer(3), Node("h", 1, "x")})}),
          "h")
          .ok());
  EXPECT_FALSE(
      ParseClusterSlots(Reply::Array({Reply::Array(
                            {Reply::Integer(0), Reply::Integer(16384), Node("h", 1, "x")})}),
                        "h")
          .ok());
}

TEST(TopologyTest, ParsesRedirections) {
  auto moved = ParseRedirect("MOVED 3999 127.0.0.1:6381", "x");
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->type, Redirect::Type::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->address, "127.0.0.1:6381");
  auto ask = ParseRedirect("ASK 1 :7000", "10.1.1.1");
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->type, Redirect::Type::kAsk);
  EXPECT_EQ(ask->address, "10.1.1.1:7000");
  EXPECT_FALSE(ParseRedirect("ERR wrong", "x").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED 16384 h:1", "x").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED x h:1", "x").has_value());
  EXPECT_FALSE(ParseRedirect("MOVED 1 nocolon", "x").has_value());
}

TEST(OptionsTest, ParseSeeds) {
  StatusOr<ClientOptions> o = ParseSeeds("127.0.0.1:7000, redis-a:7001,[::1]:7002");
  ASSERT_OK(o);
  EXPECT_EQ(o->seeds, (std::vector<std::string>{"127.0.0.1:7000", "redis-a:7001", "[::1]:7002"}));
  for (const char* bad : {"", "host", "host:", ":6379", "h:0", "h:65536", "h:1,,h:2", "h:x1"}) {
    StatusOr<ClientOptions> r = ParseSeeds(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseSeeds("a:1,b:99999").status().message().find("b:99999"), std::string::npos);
}

TEST(OptionsTest, Validate) {
  ClientOptions o;
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.seeds = {"127.0.0.1:6379"};
  EXPECT_OK(ValidateOptions(o));
  o.connections_per_node = 0;
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.connections_per_node = 2;
  o.command_timeout = std::chrono::milliseconds(0);
  EXPECT_FALSE(ValidateOptions(o).ok());
}

}  // namespace
}  // namespace dais::redis
