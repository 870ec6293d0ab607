// HTTP/1.1 to the nodes: a pool of keep-alive connections per node address, asynchronous (Asio +
// Beast, kept inside upstream.cc), on the pool's own I/O threads. The request body is sent as
// given and the answer's body returned as received: the gateway never decodes tensors.
//
// A request sent on a kept-alive connection that the node had closed meanwhile (the read sees
// the end of the stream before any byte of an answer) is sent again once on a new connection,
// as browsers and proxies do; every other failure is the caller's to retry or not.
//
// Thread-safety: Send may be called from any thread; `done` runs on a thread of the io_context.
#pragma once

#include <boost/container/small_vector.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dais/status.h"
#include "tls/context.h"

namespace boost::asio {
class io_context;
}

namespace dais::gateway {

struct UpstreamRequest {
  std::string method = "POST";
  std::string target;  // path and query
  std::vector<std::pair<std::string, std::string>> headers;
  // More headers, sent after `headers`, not copied: the caller keeps their strings alive and
  // unchanged until `done` has run (as `shared_body`; the gateway: the call's).
  boost::container::small_vector<std::pair<std::string_view, std::string_view>, 8> header_views;
  std::string body;
  // When set, sent instead of `body`, not copied: the caller keeps it alive and unchanged until
  // `done` has run (the gateway: the request's body, held by the call its `done` holds).
  const std::string* shared_body = nullptr;
  std::chrono::steady_clock::time_point deadline;

  const std::string& Body() const { return shared_body != nullptr ? *shared_body : body; }
};

struct UpstreamResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string body;
};

struct UpstreamResult {
  // Unavailable: no connection (nothing was sent; safe to try another node); DeadlineExceeded;
  // Internal: the connection failed after the request went out, or the answer was malformed.
  Status status;
  bool connect_failed = false;
  UpstreamResponse response;
};

struct UpstreamOptions {
  int threads = 2;  // with an io_context of its own
  size_t max_idle_per_address = 64;
  uint64_t max_response_bytes = 256ull << 20;
  // HTTPS to the nodes (mutual TLS with a client certificate in the context): each node's
  // certificate is checked against `tls_name`, else the host of its address.
  tls::SslCtxPtr tls_context = nullptr;
  std::string tls_name = "";
};

class UpstreamPool {
 public:
  explicit UpstreamPool(UpstreamOptions options = {});
  // On `io` (borrowed; run by its owner's threads, e.g. the gateway's HTTP server): a request
  // sent from a listener's I/O thread goes out on that thread's io_context (one per thread,
  // frontends/listen.h), no hand-off to another thread; from any other thread, on `io`.
  // The owner stops the threads running `io` before destroying the pool.
  UpstreamPool(boost::asio::io_context* io, UpstreamOptions options);
  ~UpstreamPool();  // stops the pool's own threads (pending sends are dropped with them)
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Sends `request` to `address` ("host:port", host an IPv4/IPv6 literal or a name resolved on
  // first use) and calls `done` once with the result.
  void Send(const std::string& address, UpstreamRequest request,
            std::function<void(UpstreamResult)> done);

  // The io_context the connections run on (the borrowed one, or the pool's own).
  boost::asio::io_context& io_context();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::gateway
