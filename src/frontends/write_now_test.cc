// WriteNow over a real loopback TCP connection: a write the socket takes whole completes inline
// (before WriteNow returns); one larger than the socket's buffers completes later, whole, once
// the peer reads; past the nesting bound the write goes the asynchronous way.
#include "frontends/write_now.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <string>

namespace dais::frontends {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class WriteNowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    // Small buffers both ways: a few MiB cannot fit in them whatever the host's TCP settings.
    client_.open(tcp::v4());
    client_.set_option(net::socket_base::receive_buffer_size(16 << 10));
    client_.connect(acceptor.local_endpoint());
    acceptor.accept(server_);
    server_.set_option(net::socket_base::send_buffer_size(16 << 10));
  }

  net::io_context io_;
  tcp::socket client_{io_};
  tcp::socket server_{io_};
};

TEST_F(WriteNowTest, ASmallWriteCompletesInline) {
  const std::string head = "HTTP/1.1 200 OK\r\n\r\n", body = "hello";
  const std::array<net::const_buffer, 2> out = {net::buffer(head), net::buffer(body)};
  int depth = 0;
  bool done = false;
  WriteNow(server_, server_, out, &depth, [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, head.size() + body.size());
    EXPECT_EQ(depth, 1);  // counted while it runs
    done = true;
  });
  EXPECT_TRUE(done);  // no run of the io_context needed
  EXPECT_EQ(depth, 0);
  std::string got(head.size() + body.size(), '\0');
  net::read(client_, net::buffer(got));
  EXPECT_EQ(got, head + body);
}

TEST_F(WriteNowTest, AWriteLargerThanTheSocketTakesCompletesWholeLater) {
  const std::string head(100, 'h');
  std::string body(4 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  const std::array<net::const_buffer, 2> out = {net::buffer(head), net::buffer(body)};
  int depth = 0;
  size_t written = 0;
  bool done = false;
  WriteNow(server_, server_, out, &depth, [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    written = n;
    done = true;
  });
  EXPECT_FALSE(done);  // 4 MiB do not fit in the sockets' buffers
  std::string got;
  std::array<char, 65536> buf;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < head.size() + body.size()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "got " << got.size() << " bytes";
    io_.poll();
    boost::system::error_code ec;
    client_.non_blocking(true);
    const size_t n = client_.read_some(net::buffer(buf), ec);
    if (ec && ec != net::error::would_block) FAIL() << ec.message();
    got.append(buf.data(), n);
  }
  io_.run_for(std::chrono::seconds(5));
  EXPECT_TRUE(done);
  EXPECT_EQ(written, head.size() + body.size());
  EXPECT_TRUE(got == head + body);  // in order, no byte twice or lost
}

TEST_F(WriteNowTest, PastTheNestingBoundTheWriteIsAsynchronous) {
  const std::string bytes = "x";
  const std::array<net::const_buffer, 1> out = {net::buffer(bytes)};
  int depth = kMaxInlineWrites;
  bool done = false;
  WriteNow(server_, server_, out, &depth, [&](boost::system::error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    EXPECT_EQ(n, 1u);
    done = true;
  });
  EXPECT_FALSE(done);
  io_.run_for(std::chrono::seconds(5));
  EXPECT_TRUE(done);
}

TEST_F(WriteNowTest, AClosedPeerIsAnErrorNotAHang) {
  client_.close();
  const std::string bytes(1 << 20, 'x');
  const std::array<net::const_buffer, 1> out = {net::buffer(bytes)};
  boost::system::error_code last;
  // The first writes may still be taken by the kernel; a reset follows.
  for (int i = 0; i < 50 && !last; ++i) {
    int depth = 0;
    bool done = false;
    WriteNow(server_, server_, out, &depth, [&](boost::system::error_code ec, size_t) {
      last = ec;
      done = true;
    });
    io_.run_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(done);
  }
  EXPECT_TRUE(last) << "no error after writing to a closed peer";
}

}  // namespace
}  // namespace dais::frontends
