#include <gtest/gtest.h>

#include "gateway/gateway_impl.h"

namespace dais::gateway {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// What a node sees of the client's headers (the HTTP proxy path sends the same set by view).
TEST(ForwardedHeadersTest, HopByHopAndConnectionNamedHeadersStayBehind) {
  frontends::http::Request r;
  r.headers = {{"host", "gw:8000"},
               {"connection", "keep-alive, X-Secret ,\tte"},
               {"x-secret", "s"},  // named by Connection (case-insensitively): hop-by-hop
               {"content-type", "application/json"},
               {"x-dais-hops", "2"},
               {"authorization", "Bearer t"},
               {"x-keep", "k"}};
  EXPECT_EQ(ForwardedHeaders(r),
            (Headers{{"content-type", "application/json"}, {"x-keep", "k"}, {"x-dais-hops", "3"}}));
  // No Connection header: only the fixed hop-by-hop names stay behind.
  r.headers = {{"x-secret", "s"}, {"te", "trailers"}, {"expect", "100-continue"}};
  EXPECT_EQ(ForwardedHeaders(r), (Headers{{"x-secret", "s"}, {"x-dais-hops", "1"}}));
  // An empty token list, or tokens that are only separators, name nothing.
  r.headers = {{"connection", " , ,"}, {"x-a", "1"}};
  EXPECT_EQ(ForwardedHeaders(r), (Headers{{"x-a", "1"}, {"x-dais-hops", "1"}}));
}

}  // namespace
}  // namespace dais::gateway
