// A lean blocking gRPC client connection for load generation: unary calls over HTTP/2 (nghttp2,
// prior knowledge, no TLS) on one TCP connection of its own, one call at a time (Call) or
// several at once as concurrent HTTP/2 streams (RunSlots), as gRPC clients multiplex calls on a
// channel. It costs the load generator about what its HTTP/1.1 client costs, where grpc++'s
// synchronous stub costs two to three times more CPU per call (docs/perf.md) and, on a machine
// shared with the server, takes that CPU from the server being measured.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "dais/status.h"
#include "tls/engine.h"

struct nghttp2_session;

namespace dais::perf {

class GrpcH2Connection {
 public:
  // `tls_context`: gRPC over TLS (ALPN h2), the server's certificate checked against
  // `tls_name` unless it is empty.
  GrpcH2Connection(boost::asio::io_context* ioc,
                   boost::asio::ip::tcp::resolver::results_type endpoints, std::string authority,
                   tls::SslCtxPtr tls_context = nullptr, std::string tls_name = "");
  ~GrpcH2Connection();

  // Calls `path` ("/package.Service/Method") with one serialized request message and reads the
  // whole answer. OK when grpc-status is 0; otherwise the gRPC status with the server's message.
  // Unavailable on I/O errors (the next call reconnects); Cancelled after Abort.
  Status Call(const std::string& path, const std::string& message);

  // Keeps `slots` calls of `path` in flight (messages[0], [1], ... in turn, starting at
  // *next) until stop() returns true, then waits for the open ones. done(start_ns, end_ns,
  // status) is called for every call that ends. An I/O error ends every open call with it and
  // is returned (the next run reconnects).
  using CallDone = std::function<void(int64_t start_ns, int64_t end_ns, const Status& status)>;
  Status RunSlots(const std::string& path, const std::vector<std::string>& messages, int slots,
                  size_t* next, const std::function<bool()>& stop, const CallDone& done);

  // Makes a pending Call / RunSlots return promptly; later ones return Cancelled. Any thread.
  void Abort();

 private:
  struct Stream;
  struct Callbacks;
  Status Connect();
  void Close();
  StatusOr<int32_t> Submit(const std::string& path, const std::string& message);
  // Writes what nghttp2 has to send; then, if a call is open, reads one chunk and feeds it.
  Status Pump();
  Status Result(const Stream& s) const;
  // TLS: the handshake after the TCP connect; bytes to the server (encrypted); one read,
  // decrypted into *plain (empty when it held only TLS records).
  Status Handshake();
  Status WriteAll(const std::string& bytes);
  Status ReadSome(std::string* plain);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::ip::tcp::resolver::results_type endpoints_;
  std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::string out_;
  std::string rbuf_;
  tls::SslCtxPtr tls_context_;
  std::string tls_name_;
  std::unique_ptr<tls::Engine> tls_;  // with TLS, once connected
  std::string early_;                 // plaintext that came with the end of the handshake
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;  // open calls
  std::vector<int32_t> ended_;                                    // closed since last looked
  std::atomic<bool> aborted_{false};
  Mutex fd_mu_;
  int fd_ DAIS_GUARDED_BY(fd_mu_) = -1;  // for Abort: shut down to wake a blocked read
};

}  // namespace dais::perf
