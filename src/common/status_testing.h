// GoogleTest macros for Status and StatusOr (after Abseil's status_matchers):
//   ASSERT_OK(expr); EXPECT_OK(expr);          expr is a Status or a StatusOr<T>
//   ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr); x is the value; fails the test with the status
// Each prints the status's code and message when it fails.
#pragma once

#include <gtest/gtest.h>

#include "dais/status.h"

namespace dais::testing {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) {
  return s.status();
}

}  // namespace dais::testing

#define EXPECT_OK(expr)                                                         \
  do {                                                                          \
    const ::dais::Status dais_status_ = ::dais::testing::StatusOf(expr);        \
    EXPECT_TRUE(dais_status_.ok()) << #expr << ": " << dais_status_.ToString(); \
  } while (false)

#define ASSERT_OK(expr)                                                         \
  do {                                                                          \
    const ::dais::Status dais_status_ = ::dais::testing::StatusOf(expr);        \
    ASSERT_TRUE(dais_status_.ok()) << #expr << ": " << dais_status_.ToString(); \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  DAIS_ASSERT_OK_AND_ASSIGN_IMPL(DAIS_CONCAT(dais_statusor_, __LINE__), lhs, rexpr)

#define DAIS_ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, rexpr)                    \
  auto statusor = (rexpr);                                                      \
  ASSERT_TRUE(statusor.ok()) << #rexpr << ": " << statusor.status().ToString(); \
  lhs = std::move(statusor).value()
