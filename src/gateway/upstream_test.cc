// UpstreamPool against a raw TCP "node" on loopback that writes prepared answers: the limit on
// an answer's size holds however the bytes arrive (issue 32: header and body in one write went
// past it).
#include "gateway/upstream.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <future>
#include <string>
#include <thread>

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

}  // namespace
}  // namespace dais::gateway
