// A lean blocking gRPC client connection for load generation: unary calls over HTTP/2 (nghttp2,
// prior knowledge, no TLS), one call at a time, on one TCP connection of its own. It costs the
// load generator about what its HTTP/1.1 client costs, where grpc++'s synchronous stub costs two
// to three times more CPU per call (docs/perf.md) and, on a machine shared with the server, takes
// that CPU from the server being measured.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <mutex>
#include <string>

#include "dais/status.h"

struct nghttp2_session;

namespace dais::perf {

class GrpcH2Connection {
 public:
  GrpcH2Connection(boost::asio::io_context* ioc,
                   boost::asio::ip::tcp::resolver::results_type endpoints, std::string authority);
  ~GrpcH2Connection();

  // Calls `path` ("/package.Service/Method") with one serialized request message and reads the
  // whole answer. OK when grpc-status is 0; otherwise the gRPC status with the server's message.
  // Unavailable on I/O errors (the next call reconnects); Cancelled after Abort.
  Status Call(const std::string& path, const std::string& message);
  // Makes a pending Call return promptly; later calls return Cancelled. Any thread.
  void Abort();

 private:
  struct Callbacks;
  Status Connect();
  void Close();
  Status Pump();  // writes what nghttp2 has to send, reads one chunk, feeds it

  boost::asio::ip::tcp::socket socket_;
  boost::asio::ip::tcp::resolver::results_type endpoints_;
  std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::string out_;
  std::string rbuf_;
  // The call in progress.
  const std::string* body_ = nullptr;
  size_t body_pos_ = 0;
  bool done_ = false;
  int grpc_status_ = -1;
  int http_status_ = 0;
  std::string grpc_message_;
  uint32_t reset_code_ = 0;
  std::atomic<bool> aborted_{false};
  // std::mutex: gRPC's headers, included beside this one, define Abseil's GUARDED_BY, which
  // common/mutex.h would redefine.
  std::mutex fd_mu_;
  int fd_ = -1;  // guarded by fd_mu_; for Abort: shut down to wake a blocked read
};

}  // namespace dais::perf
