#include "dais/status.h"

#include <gtest/gtest.h>

#include <memory>

#include "common/status_testing.h"

namespace dais {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(StatusTest, CodesAndMessages) {
  Status s = NotFound("model 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model 'x'");
  EXPECT_EQ(s.WithPrefix("load").message(), "load: model 'x'");
  EXPECT_OK(OkStatus());
  EXPECT_EQ(OkStatus().ToString(), "OK");
}

TEST(StatusTest, StatusOrPropagates) {
  int out = 0;
  EXPECT_OK(Quarter(8, &out));
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(StatusTest, StatusOrHoldsMoveOnly) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(7);
  ASSERT_OK(v);
  std::unique_ptr<int> p = std::move(v).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace dais
