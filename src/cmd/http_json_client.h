// A small blocking HTTP/1.1 client for JSON calls to a dais server (the `dais memory` CLI, the
// agent runtime's steps): one keep-alive connection, reopened once when it broke, a deadline per
// call bounding the connect, the write and the read together. Not thread-safe: one per thread.
// Beast stays inside http_json_client.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dais/status.h"

namespace dais::cmd {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

class HttpJsonClient {
 public:
  // `url`: http://HOST:PORT (a path after it is ignored). `token`: sent as a bearer token.
  HttpJsonClient(const std::string& url, std::string token);
  ~HttpJsonClient();
  HttpJsonClient(const HttpJsonClient&) = delete;
  HttpJsonClient& operator=(const HttpJsonClient&) = delete;

  // `method` "GET", "POST", "DELETE". Unavailable when the server cannot be reached or the
  // connection failed twice; DeadlineExceeded when no answer came by `deadline`.
  // `headers`: more request headers (name, value).
  StatusOr<HttpAnswer> Call(
      const std::string& method, const std::string& target, std::string body,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  const std::string& address() const { return address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

// "HTTP 503: <the server's error message or body>" for an answer that is not 2xx, else OK.
Status AnswerStatus(const HttpAnswer& answer);

}  // namespace dais::cmd
