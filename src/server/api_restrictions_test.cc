#include "server/api_restrictions.h"

#include <gtest/gtest.h>

#include <map>

#include "common/status_testing.h"

namespace dais::server {
namespace {

ApiRestrictions::HeaderLookup Headers(std::map<std::string, std::string> h) {
  return [h = std::move(h)](std::string_view name) -> std::optional<std::string_view> {
    auto it = h.find(std::string(name));
    if (it == h.end()) return std::nullopt;
    return std::string_view(it->second);
  };
}

TEST(ApiRestrictionsTest, OpenByDefault) {
  ApiRestrictions r;
  EXPECT_OK(r.Check(ApiGroup::kModelRepository, Headers({})));
  EXPECT_EQ(r.RequiredHeader(ApiGroup::kInference), nullptr);
}

TEST(ApiRestrictionsTest, GroupsNeedTheirHeader) {
  ASSERT_OK_AND_ASSIGN(
      ApiRestrictions r,
      ApiRestrictions::Parse({"model-repository,statistics:Admin-Key=s3cret", "inference:k=v"},
                             "--http-restricted-api", ""));
  EXPECT_OK(r.Check(ApiGroup::kHealth, Headers({})));
  Status s = r.Check(ApiGroup::kModelRepository, Headers({}));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "This API is restricted, expecting header 'admin-key'");
  EXPECT_FALSE(r.Check(ApiGroup::kStatistics, Headers({{"admin-key", "wrong"}})).ok());
  EXPECT_FALSE(r.Check(ApiGroup::kStatistics, Headers({{"admin-key", "S3CRET"}})).ok());
  EXPECT_OK(r.Check(ApiGroup::kStatistics, Headers({{"admin-key", "s3cret"}})));
  EXPECT_OK(r.Check(ApiGroup::kInference, Headers({{"k", "v"}})));
  EXPECT_FALSE(r.Check(ApiGroup::kInference, Headers({{"admin-key", "s3cret"}})).ok());
}

TEST(ApiRestrictionsTest, GrpcPrefix) {
  ASSERT_OK_AND_ASSIGN(ApiRestrictions r,
                       ApiRestrictions::Parse({"health:admin=1"}, "--grpc-restricted-protocol",
                                              "triton-grpc-protocol-"));
  ASSERT_NE(r.RequiredHeader(ApiGroup::kHealth), nullptr);
  EXPECT_EQ(*r.RequiredHeader(ApiGroup::kHealth), "triton-grpc-protocol-admin");
  EXPECT_OK(r.Check(ApiGroup::kHealth, Headers({{"triton-grpc-protocol-admin", "1"}})));
}

TEST(ApiRestrictionsTest, BadSpecsNameTheFault) {
  const std::pair<const char*, const char*> kCases[] = {
      {"model-repository", "expected <api>"},
      {"model-repository:key", "expected <api>"},
      {":k=v", "expected <api>"},
      {"health:=v", "expected <api>"},
      {"health:k=", "expected <api>"},
      {"healthy:k=v", "unknown API 'healthy'"},
      {"health,,metadata:k=v", "unknown API ''"},
      {"health,health:k=v", "already in another group"},
  };
  for (const auto& [spec, want] : kCases) {
    auto r = ApiRestrictions::Parse({spec}, "--http-restricted-api", "");
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--http-restricted-api"), std::string::npos);
  }
  auto twice = ApiRestrictions::Parse({"health:a=1", "metadata,health:b=2"}, "--x", "");
  EXPECT_FALSE(twice.ok());
}

}  // namespace
}  // namespace dais::server
