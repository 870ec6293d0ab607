#include "common/trace_context.h"

#include <gtest/gtest.h>

namespace dais {
namespace {

TEST(TraceContextTest, ParsesTheSpecificationsExample) {
  auto t = ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id, "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(t->parent_id, "b7ad6b7169203331");
  EXPECT_TRUE(t->sampled());
  EXPECT_EQ(t->Header("00f067aa0ba902b7"),
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01");
}

TEST(TraceContextTest, RefusesWhatIsNotATraceparent) {
  for (const char* bad : {
           "",
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",        // no flags
           "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",     // upper case
           "00-00000000000000000000000000000000-b7ad6b7169203331-01",     // zero trace id
           "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",     // zero parent
           "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",     // version ff
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xx",  // 00 has 4 fields
           "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",     // separator
           "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",     // not hex
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  // A later version: its first four fields, if a '-' follows.
  EXPECT_TRUE(
      ParseTraceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-more").has_value());
  EXPECT_FALSE(
      ParseTraceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00more").has_value());
}

TEST(TraceContextTest, NewIdsAreHexOfTheirLengthAndDiffer) {
  const std::string a = NewTraceId(), b = NewTraceId(), s = NewSpanId();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(s.size(), 16u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(ParseTraceparent("00-" + a + "-" + s + "-00").has_value());
}

TEST(TraceContextTest, RequestIdsArePrintableAndBounded) {
  EXPECT_EQ(SaneRequestId("req-42"), "req-42");
  EXPECT_EQ(SaneRequestId(""), "");
  EXPECT_EQ(SaneRequestId("a b"), "");
  EXPECT_EQ(SaneRequestId(std::string(129, 'x')), "");
  EXPECT_EQ(SaneRequestId("\x01x"), "");
}

TEST(TraceContextTest, AServerTraceContinuesTheCallersOrStartsOne) {
  const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  ServerTrace t = BeginServerTrace(caller, "order-1", 0);
  EXPECT_EQ(t.trace.trace_id, "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(t.trace.parent_id, "b7ad6b7169203331");
  EXPECT_TRUE(t.trace.sampled());  // the caller's flag, whatever the rate
  EXPECT_EQ(t.request_id, "order-1");
  EXPECT_GT(t.start_unix_ns, 0);
  EXPECT_EQ(t.Outgoing(), "00-0af7651916cd43dd8448eb211c80319c-" + t.span_id + "-01");
  char buffer[64];
  const size_t n = t.trace.HeaderTo(t.span_id, buffer, sizeof(buffer));
  EXPECT_EQ(std::string(buffer, n), t.Outgoing());
  EXPECT_EQ(n, 55u);
  EXPECT_EQ(t.trace.HeaderTo(t.span_id, buffer, 54), 0u);  // does not fit: nothing
  // Malformed or absent: a new trace, the trace id as the request id, sampled by the rate.
  ServerTrace fresh = BeginServerTrace("00-XYZ", "a b", 0);
  EXPECT_NE(fresh.trace.trace_id, t.trace.trace_id);
  EXPECT_TRUE(fresh.trace.parent_id.empty());
  EXPECT_FALSE(fresh.trace.sampled());
  EXPECT_EQ(fresh.request_id, fresh.trace.trace_id);
  EXPECT_TRUE(BeginServerTrace("", "", 1.0).trace.sampled());
}

}  // namespace
}  // namespace dais
