// A small HTTP/1.1 server on Boost.Beast: a pool of I/O threads, keep-alive, a body size limit.
// It knows nothing of inference: each request goes to a Handler, which answers through the
// Responder, from any thread and at any later time (exactly once). Beast stays inside
// http_server.cc so that the rest of dais compiles without it.
//
// Threading: `threads` threads run one io_context; a connection serves one request at a time
// (HTTP/1.1 without pipelined concurrency), so a connection's state is touched by one thread
// at a time. Responder posts the write back to the connection's strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dais/status.h"
#include "frontends/endpoint.h"

namespace boost::asio {
class io_context;
}

namespace dais::frontends::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;  // decompressed when it came with Content-Encoding gzip / deflate
  // Value of a header (name lower-case), or empty.
  std::string_view Header(std::string_view name) const;
};

// An answer written in pieces as they come (server-sent events): the head at once, without a
// length, then the bytes of each Send() in order, until Close() or the client goes away (the
// connection then closes: no keep-alive after a stream). Thread-safe; Send() after the end is
// dropped and answers false.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool Send(std::string bytes) = 0;
  virtual bool open() const = 0;
  virtual void Close() = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // May be compressed by Accept-Encoding (ServerOptions::compress_min_bytes). Set only on answers
  // whose clients decompress: inference results (as Triton does), /metrics and the Feast API.
  // Triton's other endpoints (metadata, config, statistics, repository) are never compressed:
  // tritonclient.http.aio reads them with aiohttp's auto_decompress=False and would get gzip.
  bool compressible = false;
  // Set: `body` is ignored and the answer streams; called once the head is on its way, with the
  // sink that writes the rest (StreamSink).
  std::function<void(std::shared_ptr<StreamSink>)> stream = nullptr;
};

using Responder = std::function<void(Response)>;
using Handler = std::function<void(Request, Responder)>;

// Open connections (max_connections): a connection waiting for its next request is idle.
struct ServerOptions : EndpointOptions {
  // Largest request body, as sent and (Content-Encoding gzip / deflate) once decompressed.
  uint64_t max_body_bytes = 64ull << 20;
  // A chunked (Transfer-Encoding) body in more chunks than this is refused with 413.
  uint64_t max_body_chunks = 65536;
  // A JSON body (or the JSON header of a binary one) nested deeper is refused with 400 as it
  // arrives. The handler's parsers apply the same limit.
  int max_json_depth = 100;
  // Compressible answers (Response::compressible) at least this long are compressed when the
  // request's Accept-Encoding allows gzip or deflate.
  uint64_t compress_min_bytes = 1024;
  std::string listener = "http";  // names the connections in the metrics
  // A connection waiting this long for (the rest of) a request is closed.
  int idle_timeout_secs = 120;
  // A connection that has not completed a request head yet, accepted while the listener is
  // under pressure (three quarters of its connection limit open), is closed after this instead.
  int header_timeout_under_pressure_secs = 5;
};

// An HTTP/1.1 server on a frontends::Listener: each request goes to the handler, which answers
// through the Responder (from any thread, exactly once).
class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  // Binds and starts the I/O threads. InvalidArgument / Unavailable if the port can't be bound.
  Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // Runs `fn` on an I/O thread (used to move response encoding off runtime threads).
  void Post(std::function<void()> fn);
  // The io_context the I/O threads run (from construction on), for components that do their own
  // asynchronous I/O on the same threads (the gateway's connections to the nodes).
  boost::asio::io_context& io_context();
  // Stops accepting new connections; open ones keep being served.
  void StopAccepting();
  // Stops everything and joins the I/O threads.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace dais::frontends::http
