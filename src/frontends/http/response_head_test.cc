#include "frontends/http/response_head.h"

#include <gtest/gtest.h>

namespace dais::frontends::http {
namespace {

TEST(ResponseHeadTest, StatusTypeHeadersLengthAndTheEmptyLine) {
  Response r{200, "application/json", "{}", {{"x-request-id", "abc"}}};
  std::string head = "left over";
  WriteResponseHead(r, 2, true, "", false, &head);
  EXPECT_EQ(head,
            "HTTP/1.1 200 OK\r\nServer: dais\r\nContent-Type: application/json\r\n"
            "x-request-id: abc\r\nContent-Length: 2\r\n\r\n");
}

TEST(ResponseHeadTest, ClosedCompressedAndVaried) {
  Response r{503, "application/json", "", {{"Retry-After", "1"}, {"Vary", "Origin"}}};
  std::string head;
  WriteResponseHead(r, 10, false, "gzip", true, &head);
  EXPECT_EQ(head,
            "HTTP/1.1 503 Service Unavailable\r\nServer: dais\r\nContent-Type: application/json\r\n"
            "Retry-After: 1\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n"
            "Content-Length: 10\r\nConnection: close\r\n\r\n");
}

TEST(ResponseHeadTest, TheServersFramingWinsAndTheLastOfANameCounts) {
  Response r{200,
             "text/plain",
             "",
             {{"Content-Length", "999"},
              {"transfer-encoding", "chunked"},
              {"connection", "upgrade"},
              {"server", "node"},
              {"content-type", "application/octet-stream"},
              {"x-a", "1"},
              {"X-A", "2"},
              {"x-evil", "a\r\nx-injected: 1"}}};
  std::string head;
  WriteResponseHead(r, 4, true, "", false, &head);
  EXPECT_EQ(head,
            "HTTP/1.1 200 OK\r\nServer: dais\r\ncontent-type: application/octet-stream\r\n"
            "X-A: 2\r\nContent-Length: 4\r\n\r\n");
}

TEST(ResponseHeadTest, NoLengthWhereABodyIsNotAllowed) {
  for (int status : {204, 304}) {
    Response r{status, "", "", {}};
    std::string head;
    WriteResponseHead(r, 0, true, "", false, &head);
    EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
    EXPECT_FALSE(StatusHasBody(status));
  }
  EXPECT_TRUE(StatusHasBody(200));
  EXPECT_TRUE(StatusHasBody(404));
}

}  // namespace
}  // namespace dais::frontends::http
