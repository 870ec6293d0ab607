// GrpcUpstream against a real gRPC server on loopback (dais's own H2Server): unary and
// bidirectional calls multiplexed on one connection, statuses passed on, deadlines, and the
// `not_sent` mark that makes a retry on another node safe.
#include "gateway/grpc_upstream.h"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <thread>

#include "common/status_testing.h"
#include "frontends/grpc/h2_server.h"
#include "frontends/listen.h"

namespace dais::gateway {
namespace {

using frontends::grpc::H2Server;
using frontends::grpc::H2ServerOptions;
using frontends::grpc::MethodTable;
using frontends::grpc::ServerCall;
using frontends::grpc::StreamHandler;

class Echo : public StreamHandler {
 public:
  explicit Echo(std::shared_ptr<ServerCall> call) : call_(std::move(call)) {}
  void OnMessage(std::string m) override { call_->Write("echo:" + m); }
  void OnHalfClose() override { call_->Finish(::grpc::Status::OK); }

 private:
  std::shared_ptr<ServerCall> call_;
};

MethodTable Methods() {
  MethodTable t;
  t["/t.S/Echo"].unary = [](std::shared_ptr<ServerCall> c, std::string m) {
    const auto who = c->Metadata("x-user");
    c->Reply(m + "|" + std::string(who.value_or("-")));
  };
  t["/t.S/Fail"].unary = [](std::shared_ptr<ServerCall> c, std::string) {
    c->Finish(::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "model 100% busy"));
  };
  t["/t.S/Never"].unary = [](std::shared_ptr<ServerCall>, std::string) {};
  t["/t.S/Chat"].stream = [](std::shared_ptr<ServerCall> c) { return std::make_shared<Echo>(c); };
  return t;
}

struct Outcome {
  std::vector<std::string> messages;
  GrpcResult result;
};

class GrpcUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H2ServerOptions o;
    o.address = "127.0.0.1";
    o.threads = 1;
    server_ = std::make_unique<H2Server>(o, Methods());
    ASSERT_OK(server_->Start());
    address_ = "127.0.0.1:" + std::to_string(server_->port());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    upstream_.reset();
    work_.reset();
    io_.stop();
    thread_.join();
    if (server_) server_->Stop(1000);
  }

  // Starts a call; the future is set when it finishes.
  std::future<Outcome> Call(const std::string& address, const std::string& path,
                            std::vector<std::string> messages, bool half_close = true,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10),
                            std::shared_ptr<GrpcUpstreamCall>* handle = nullptr) {
    auto promise = std::make_shared<std::promise<Outcome>>();
    auto outcome = std::make_shared<Outcome>();
    GrpcCallOptions o;
    o.path = path;
    o.metadata = {{"x-user", "ada"}};
    o.deadline = std::chrono::steady_clock::now() + timeout;
    o.on_message = [outcome](std::string m) { outcome->messages.push_back(std::move(m)); };
    o.on_finish = [outcome, promise](GrpcResult r) {
      outcome->result = std::move(r);
      promise->set_value(std::move(*outcome));
    };
    auto call = upstream_->Start(address, std::move(o));
    for (auto& m : messages) call->Send(std::move(m));
    if (half_close) call->HalfClose();
    if (handle != nullptr) *handle = call;
    return promise->get_future();
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::unique_ptr<GrpcUpstream> upstream_ = std::make_unique<GrpcUpstream>(&io_);
  std::unique_ptr<H2Server> server_;
  std::string address_;
  std::thread thread_;
};

TEST_F(GrpcUpstreamTest, UnaryCallsMultiplexAndCarryMetadata) {
  std::vector<std::future<Outcome>> calls;
  for (int i = 0; i < 50; ++i) calls.push_back(Call(address_, "/t.S/Echo", {std::to_string(i)}));
  for (int i = 0; i < 50; ++i) {
    Outcome o = calls[i].get();
    EXPECT_EQ(o.result.code, 0) << o.result.message;
    ASSERT_EQ(o.messages.size(), 1u);
    EXPECT_EQ(o.messages[0], std::to_string(i) + "|ada");
  }
  // A big message crosses many DATA frames both ways.
  const std::string big(3 << 20, 'x');
  Outcome o = Call(address_, "/t.S/Echo", {big}).get();
  ASSERT_EQ(o.messages.size(), 1u);
  EXPECT_EQ(o.messages[0].size(), big.size() + 4);
}

TEST_F(GrpcUpstreamTest, StatusesAndMessagesPassThrough) {
  Outcome o = Call(address_, "/t.S/Fail", {"x"}).get();
  EXPECT_EQ(o.result.code, 14);
  EXPECT_EQ(o.result.message, "model 100% busy");
  EXPECT_FALSE(o.result.not_sent);
  o = Call(address_, "/t.S/Nope", {"x"}).get();
  EXPECT_EQ(o.result.code, 12);  // UNIMPLEMENTED
}

TEST_F(GrpcUpstreamTest, BidirectionalStreamsSendAndReceiveInOrder) {
  std::shared_ptr<GrpcUpstreamCall> call;
  auto done = Call(address_, "/t.S/Chat", {"a", "b"}, false, std::chrono::seconds(10), &call);
  call->Send("c");
  call->HalfClose();
  Outcome o = done.get();
  EXPECT_EQ(o.result.code, 0) << o.result.message;
  EXPECT_EQ(o.messages, (std::vector<std::string>{"echo:a", "echo:b", "echo:c"}));
}

TEST_F(GrpcUpstreamTest, TheDeadlineEndsACallTheNodeDoesNotAnswer) {
  Outcome o = Call(address_, "/t.S/Never", {"x"}, true, std::chrono::milliseconds(200)).get();
  EXPECT_EQ(o.result.code, 4);
  EXPECT_TRUE(o.result.timed_out);
  // The connection still serves the next call.
  o = Call(address_, "/t.S/Echo", {"y"}).get();
  EXPECT_EQ(o.result.code, 0);
}

TEST_F(GrpcUpstreamTest, DeadlinesOfCallsSharingAConnectionEachEndTheirOwn) {
  using std::chrono::milliseconds;
  // A far deadline first, then nearer ones: each nearer one re-arms the connection's timer,
  // and a sweep re-arms it for the next.
  std::shared_ptr<GrpcUpstreamCall> far;
  auto far_done = Call(address_, "/t.S/Never", {"x"}, true, std::chrono::seconds(30), &far);
  const auto start = std::chrono::steady_clock::now();
  auto near = Call(address_, "/t.S/Never", {"x"}, true, milliseconds(200));
  auto later = Call(address_, "/t.S/Never", {"x"}, true, milliseconds(500));
  Outcome o = near.get();
  EXPECT_EQ(o.result.code, 4);
  EXPECT_TRUE(o.result.timed_out);
  o = later.get();
  EXPECT_EQ(o.result.code, 4);
  EXPECT_TRUE(o.result.timed_out);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(500));
  // The far call is still open, and ends when cancelled, not by a deadline.
  EXPECT_EQ(far_done.wait_for(milliseconds(0)), std::future_status::timeout);
  far->Cancel();
  o = far_done.get();
  EXPECT_EQ(o.result.code, 1);
  EXPECT_FALSE(o.result.timed_out);
}

TEST_F(GrpcUpstreamTest, StartUnarySendsTheMessageAndHalfCloses) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto outcome = std::make_shared<Outcome>();
  GrpcCallOptions o;
  o.path = "/t.S/Echo";
  o.on_message = [outcome](std::string m) { outcome->messages.push_back(std::move(m)); };
  o.on_finish = [outcome, promise](GrpcResult r) {
    outcome->result = std::move(r);
    promise->set_value(std::move(*outcome));
  };
  upstream_->StartUnary(address_, std::move(o), "hello");
  Outcome r = promise->get_future().get();
  EXPECT_EQ(r.result.code, 0) << r.result.message;
  EXPECT_EQ(r.messages, (std::vector<std::string>{"hello|-"}));
}

// A call started on a listener's I/O thread runs on that thread's io_context, not on the one
// given at construction: on_finish comes back on the thread that started it.
TEST_F(GrpcUpstreamTest, CallsStartedOnAnIoThreadStayOnIt) {
  boost::asio::io_context other(1);
  auto guard = boost::asio::make_work_guard(other);
  std::thread::id other_id;
  std::thread t([&] {
    frontends::CurrentIoContext() = &other;
    other_id = std::this_thread::get_id();
    other.run();
  });
  for (int i = 0; i < 3; ++i) {
    std::promise<std::thread::id> finished_on;
    boost::asio::post(other, [&] {
      GrpcCallOptions o;
      o.path = "/t.S/Echo";
      o.on_finish = [&finished_on](GrpcResult r) {
        EXPECT_EQ(r.code, 0) << r.message;
        finished_on.set_value(std::this_thread::get_id());
      };
      upstream_->StartUnary(address_, std::move(o), "x");
    });
    EXPECT_EQ(finished_on.get_future().get(), other_id);
  }
  // CloseAll before that thread's io_context goes: its connection closes, and a call started
  // from a plain thread afterwards works on the default io_context.
  upstream_->CloseAll();
  Outcome r = Call(address_, "/t.S/Echo", {"y"}).get();
  EXPECT_EQ(r.result.code, 0) << r.result.message;
  guard.reset();
  t.join();  // returns: the closed connection left no work behind
}

TEST_F(GrpcUpstreamTest, CloseAllEndsOpenCallsAndLaterCallsReconnect) {
  auto open = Call(address_, "/t.S/Never", {"x"});
  // The call reached the node once a later call on the same connection is answered.
  ASSERT_EQ(Call(address_, "/t.S/Echo", {"a"}).get().result.code, 0);
  upstream_->CloseAll();
  Outcome o = open.get();
  EXPECT_EQ(o.result.code, 14);
  EXPECT_FALSE(o.result.not_sent) << o.result.message;
  o = Call(address_, "/t.S/Echo", {"b"}).get();
  EXPECT_EQ(o.result.code, 0) << o.result.message;
}

TEST_F(GrpcUpstreamTest, ANodeThatIsNotThereIsNotSentAndCancelEnds) {
  server_->Stop(1000);
  server_.reset();
  Outcome o = Call(address_, "/t.S/Echo", {"x"}).get();
  EXPECT_EQ(o.result.code, 14);
  EXPECT_TRUE(o.result.not_sent) << o.result.message;
  o = Call("no-port", "/t.S/Echo", {"x"}).get();
  EXPECT_TRUE(o.result.not_sent);
  std::shared_ptr<GrpcUpstreamCall> call;
  auto done = Call("127.0.0.1:1", "/t.S/Echo", {}, false, std::chrono::seconds(10), &call);
  call->Cancel();
  o = done.get();
  EXPECT_TRUE(o.result.code == 1 || o.result.not_sent) << o.result.message;
}

}  // namespace
}  // namespace dais::gateway
