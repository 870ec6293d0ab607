#include "frontends/http/router.h"

#include <gtest/gtest.h>

namespace dais::frontends::http {
namespace {

struct Call {
  std::string route;
  std::string model, version;
};

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto record = [this](std::string name) {
      return [this, name](Request&, const RouteParams& p, Responder& w) {
        last_ = Call{name, p.Get("model"), p.Get("version")};
        w(Response{200, "text/plain", name, {}});
      };
    };
    router_.Add("GET", "/v2/models/stats", record("all-stats"));
    router_.Add("GET", "/v2/models/{model}", record("metadata"));
    router_.Add("GET", "/v2/models/{model}/versions/{version}", record("metadata-v"));
    router_.Add("POST", "/v2/models/{model}/infer", record("infer"));
    router_.Add("*", "/push", record("push"));
  }

  Response Dispatch(const std::string& method, const std::string& path) {
    Request r;
    r.method = method;
    r.path = path;
    Response out;
    Responder w = [&out](Response resp) { out = std::move(resp); };
    router_.Dispatch(r, w);
    return out;
  }

  Router router_;
  Call last_;
};

TEST_F(RouterTest, CapturesSegmentsAndPrefersEarlierRoutes) {
  EXPECT_EQ(Dispatch("GET", "/v2/models/stats").body, "all-stats");
  EXPECT_EQ(Dispatch("GET", "/v2/models/m1").body, "metadata");
  EXPECT_EQ(last_.model, "m1");
  EXPECT_EQ(Dispatch("GET", "//v2/models/m1/versions/3/").body, "metadata-v");
  EXPECT_EQ(last_.model, "m1");
  EXPECT_EQ(last_.version, "3");
  EXPECT_EQ(Dispatch("POST", "/v2/models/m1/infer").body, "infer");
  EXPECT_EQ(Dispatch("DELETE", "/push").body, "push");
}

TEST_F(RouterTest, WrongMethodIs405AndUnknownPathIs404) {
  Response r = Dispatch("GET", "/v2/models/m1/infer");
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.body.find("GET"), std::string::npos);
  r = Dispatch("GET", "/v2/models/m1/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("/v2/models/m1/nothing"), std::string::npos);
  EXPECT_EQ(Dispatch("GET", "/").status, 404);
}

TEST(PathSegmentsTest, SkipsEmptySegments) {
  EXPECT_EQ(PathSegments("/a//b/"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_TRUE(PathSegments("///").empty());
}

}  // namespace
}  // namespace dais::frontends::http
