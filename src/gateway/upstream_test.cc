// UpstreamPool against a raw TCP "node" on loopback that writes prepared answers: the limit on
// an answer's size holds however the bytes arrive (issue 32: header and body in one write went
// past it).
#include "gateway/upstream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dais::gateway {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Accepts one connection, reads the request head, writes `answer` in one write and closes.
class RawNode {
 public:
  explicit RawNode(std::string answer)
      : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)),
        answer_(std::move(answer)) {
    thread_ = std::thread([this] {
      tcp::socket s(io_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec) return;
      std::string head;
      char c;
      while (head.find("\r\n\r\n") == std::string::npos && net::read(s, net::buffer(&c, 1), ec))
        head += c;
      net::write(s, net::buffer(answer_), ec);
      s.shutdown(tcp::socket::shutdown_send, ec);
      while (net::read(s, net::buffer(&c, 1), ec)) {
      }
    });
  }
  ~RawNode() {
    acceptor_.close();
    thread_.join();
  }
  std::string address() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::string answer_;
  std::thread thread_;
};

// Serves connections one after the other; on each, reads requests (head, then a Content-Length
// body) and answers each with the next of `answers`; "" closes the connection instead of
// answering (the next answer goes to the next connection). Records the requests.
class ScriptedNode {
 public:
  explicit ScriptedNode(std::vector<std::string> answers)
      : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)),
        answers_(std::move(answers)) {
    thread_ = std::thread([this] {
      size_t next = 0;
      while (next < answers_.size()) {
        tcp::socket s(io_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec) return;
        ++connections_;
        while (next < answers_.size()) {
          std::string head;
          char c;
          while (head.find("\r\n\r\n") == std::string::npos && net::read(s, net::buffer(&c, 1), ec))
            head += c;
          if (ec) break;
          size_t length = 0;
          if (auto at = head.find("Content-Length: "); at != std::string::npos) {
            length = std::stoul(head.substr(at + 16));
          }
          std::string body(length, '\0');
          net::read(s, net::buffer(body), ec);
          {
            std::lock_guard<std::mutex> l(mu_);
            requests_.push_back(head + body);
          }
          const std::string& answer = answers_[next++];
          if (answer.empty()) break;  // close without answering
          net::write(s, net::buffer(answer), ec);
        }
      }
    });
  }
  ~ScriptedNode() {
    acceptor_.close();
    thread_.join();
  }
  std::string address() const {
    return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  int connections() const { return connections_.load(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<std::string> answers_;
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

UpstreamResult SendTo(UpstreamPool& pool, const std::string& address) {
  std::promise<UpstreamResult> done;
  UpstreamRequest r;
  r.method = "GET";
  r.target = "/v2/models/m";
  r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pool.Send(address, std::move(r), [&done](UpstreamResult res) { done.set_value(std::move(res)); });
  return done.get_future().get();
}

constexpr uint64_t kLimit = 1 << 20;

UpstreamOptions Limited() {
  UpstreamOptions o;
  o.threads = 1;
  o.max_response_bytes = kLimit;
  return o;
}

TEST(UpstreamTest, AnswerUnderTheLimitArrivesWhole) {
  RawNode node("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.response.body, "hello");
}

TEST(UpstreamTest, LengthPastTheLimitInOneWriteIsRefused) {
  const std::string body(3 * kLimit, 'x');
  RawNode node("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\nConnection: close\r\n\r\n" + body);
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("limit"), std::string::npos) << r.status.message();
}

TEST(UpstreamTest, CloseDelimitedPastTheLimitIsRefused) {
  RawNode node("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(3 * kLimit, 'x'));
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_FALSE(r.status.ok()) << r.response.body.size();
  EXPECT_NE(r.status.message().find("limit"), std::string::npos) << r.status.message();
}

TEST(UpstreamTest, ChunkedPastTheLimitIsRefused) {
  std::string answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  const std::string chunk(256 * 1024, 'x');
  for (int i = 0; i < 12; ++i) answer += "40000\r\n" + chunk + "\r\n";
  answer += "0\r\n\r\n";
  RawNode node(answer);
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_FALSE(r.status.ok()) << r.response.body.size();
  EXPECT_NE(r.status.message().find("limit"), std::string::npos) << r.status.message();
}

constexpr const char* kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

TEST(UpstreamTest, KeptAliveConnectionCarriesTheNextRequest) {
  ScriptedNode node({kOk, "HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-A: b\r\n\r\nyes"});
  UpstreamPool pool(Limited());
  UpstreamResult first = SendTo(pool, node.address());
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  EXPECT_EQ(first.response.body, "ok");
  UpstreamResult second = SendTo(pool, node.address());
  ASSERT_TRUE(second.status.ok()) << second.status.message();
  EXPECT_EQ(second.response.status, 201);
  EXPECT_EQ(second.response.body, "yes");
  ASSERT_EQ(second.response.headers.size(), 2u);
  EXPECT_EQ(second.response.headers[1].first, "x-a");  // names lower-cased
  EXPECT_EQ(second.response.headers[1].second, "b");
  EXPECT_EQ(node.connections(), 1);
}

TEST(UpstreamTest, HeadAndBodyGoOutFramedByTheGateway) {
  ScriptedNode node({kOk});
  UpstreamPool pool(Limited());
  std::promise<UpstreamResult> done;
  UpstreamRequest r;
  r.target = "/v2/models/m/infer?x=1";
  r.body = "{\"inputs\":[]}";
  r.headers = {{"content-type", "application/json"},
               {"Content-Length", "999"},          // framed by the gateway, not the caller
               {"x-evil", "a\r\nx-injected: 1"}};  // a line break: dropped
  // Headers by view (the caller's strings, not copied) go out after the owned ones, under the
  // same rules.
  const std::string trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  r.header_views = {{"traceparent", trace},
                    {"transfer-encoding", "chunked"},  // framing: the gateway's
                    {"x-view", "v\nx-injected: 2"},
                    {"x-cr", "a\rb"}};  // a bare CR: dropped too
  r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pool.Send(node.address(), std::move(r), [&done](UpstreamResult res) { done.set_value(res); });
  ASSERT_TRUE(done.get_future().get().status.ok());
  ASSERT_EQ(node.requests().size(), 1u);
  const std::string seen = node.requests()[0];
  EXPECT_EQ(
      seen.rfind("POST /v2/models/m/infer?x=1 HTTP/1.1\r\nHost: " + node.address() + "\r\n", 0), 0u)
      << seen;
  EXPECT_NE(seen.find("content-type: application/json\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Content-Length: 13\r\n\r\n{\"inputs\":[]}"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("999"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("injected"), std::string::npos) << seen;
  EXPECT_NE(seen.find("content-type: application/json\r\ntraceparent: " + trace + "\r\n"),
            std::string::npos)
      << seen;
  EXPECT_EQ(seen.find("chunked"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("x-cr"), std::string::npos) << seen;
}

TEST(UpstreamTest, InterimAnswersAreSkippedAndChunkedBodiesJoined) {
  ScriptedNode node(
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"});
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.response.status, 200);
  EXPECT_EQ(r.response.body, "abcde");
  for (const auto& [k, v] : r.response.headers) EXPECT_NE(k, "x-trailer");
}

TEST(UpstreamTest, AKeptAliveConnectionTheNodeClosedIsReplacedOnce) {
  // The first answer keeps the connection; the node then closes it without answering the
  // second request, which goes again on a new connection.
  ScriptedNode node({kOk, "", kOk});
  UpstreamPool pool(Limited());
  ASSERT_TRUE(SendTo(pool, node.address()).status.ok());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.response.body, "ok");
  EXPECT_EQ(node.connections(), 2);
}

TEST(UpstreamTest, NoBodyAfterA304OrA204WhateverItsLength) {
  // llhttp 8 alone would wait for the 304's declared 10 bytes (until the deadline).
  ScriptedNode node({"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
                     "HTTP/1.1 204 No Content\r\nContent-Length: 99999999999\r\n\r\n"});
  UpstreamPool pool(Limited());
  UpstreamResult first = SendTo(pool, node.address());
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  EXPECT_EQ(first.response.status, 304);
  UpstreamResult second = SendTo(pool, node.address());
  ASSERT_TRUE(second.status.ok()) << second.status.message();
  EXPECT_EQ(second.response.status, 204);
  EXPECT_EQ(node.connections(), 1);
}

TEST(UpstreamTest, AnAnswerHeadPastItsLimitIsRefused) {
  std::string answer = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 2000; ++i)
    answer += "X-Filler-" + std::to_string(i) + ": " + std::string(40, 'v') + "\r\n";
  answer += "Content-Length: 0\r\n\r\n";
  RawNode node(answer);
  UpstreamPool pool(Limited());
  UpstreamResult r = SendTo(pool, node.address());
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("head exceeds"), std::string::npos) << r.status.message();
}

TEST(UpstreamTest, MalformedAndCutAnswersAreErrorsNamingTheNode) {
  {
    ScriptedNode node({"HTTP/1.1 2x0 OK\r\n\r\n"});
    UpstreamPool pool(Limited());
    UpstreamResult r = SendTo(pool, node.address());
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find("malformed answer from " + node.address()), std::string::npos)
        << r.status.message();
  }
  {
    RawNode node("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf");
    UpstreamPool pool(Limited());
    UpstreamResult r = SendTo(pool, node.address());
    ASSERT_FALSE(r.status.ok());
    EXPECT_FALSE(r.connect_failed);
  }
}

TEST(UpstreamTest, ADeadlineEndsAnAnswerThatNeverComes) {
  // A listening socket nobody accepts from: the kernel completes the connection and takes the
  // request, no answer ever comes.
  net::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  UpstreamPool pool(Limited());
  std::promise<UpstreamResult> done;
  UpstreamRequest r;
  r.method = "GET";
  r.target = "/";
  r.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  pool.Send("127.0.0.1:" + std::to_string(silent.local_endpoint().port()), std::move(r),
            [&done](UpstreamResult res) { done.set_value(res); });
  UpstreamResult result = done.get_future().get();
  EXPECT_EQ(result.status.code(), StatusCode::kDeadlineExceeded) << result.status.message();
}

}  // namespace
}  // namespace dais::gateway
