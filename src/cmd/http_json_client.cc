#include "cmd/http_json_client.h"

#include <rapidjson/document.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "common/json.h"

namespace dais::cmd {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = boost::asio::ip::tcp;

// Asynchronous operations run on a private io_context until they finish: a beast::tcp_stream's
// expiry bounds the connect, the write and the read together by the call's deadline (a blocking
// socket with SO_RCVTIMEO would not: Asio's synchronous read polls again without a limit).
struct HttpJsonClient::Impl {
  std::string token, host, port;
  boost::asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void Expire(std::chrono::steady_clock::time_point deadline) {
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      stream->expires_never();
    } else {
      stream->expires_at(deadline);
    }
  }

  // Runs what was started until it completed.
  void Run() {
    io.restart();
    io.run();
  }
};

HttpJsonClient::HttpJsonClient(const std::string& url, std::string token)
    : impl_(std::make_unique<Impl>()) {
  impl_->token = std::move(token);
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  const size_t colon = rest.rfind(':');
  impl_->host = colon == std::string::npos ? rest : rest.substr(0, colon);
  impl_->port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  address_ = impl_->host + ":" + impl_->port;
}

HttpJsonClient::~HttpJsonClient() = default;

StatusOr<HttpAnswer> HttpJsonClient::Call(
    const std::string& method, const std::string& target, std::string body,
    std::chrono::steady_clock::time_point deadline,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  Impl& m = *impl_;
  bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
  req.set(bhttp::field::host, m.host);
  req.set(bhttp::field::content_type, "application/json");
  if (!m.token.empty()) req.set(bhttp::field::authorization, "Bearer " + m.token);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::move(body);
  req.prepare_payload();
  const auto late = [&] {
    return DeadlineExceeded("no answer from " + address_ + " before the deadline");
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (std::chrono::steady_clock::now() >= deadline) return late();
    beast::error_code ec;
    if (!m.stream) {
      tcp::resolver resolver(m.io);
      auto endpoints = resolver.resolve(m.host, m.port, ec);
      if (ec) return Unavailable("cannot resolve " + address_ + ": " + ec.message());
      m.stream.emplace(m.io);
      m.Expire(deadline);
      m.stream->async_connect(endpoints,
                              [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
      m.Run();
      if (ec == beast::error::timeout) {
        m.stream.reset();
        return late();
      }
      if (ec) {
        m.stream.reset();
        return Unavailable("cannot connect to " + address_ + ": " + ec.message());
      }
      m.stream->socket().set_option(tcp::no_delay(true), ec);
    }
    m.Expire(deadline);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1ull << 32);
    bhttp::async_write(*m.stream, req, [&](beast::error_code e, size_t) {
      ec = e;
      if (!e) {
        bhttp::async_read(*m.stream, m.buffer, parser,
                          [&ec](beast::error_code e2, size_t) { ec = e2; });
      }
    });
    m.Run();
    if (!ec) {
      auto res = parser.release();
      if (!res.keep_alive()) m.stream.reset();
      return HttpAnswer{static_cast<int>(res.result_int()), std::move(res.body())};
    }
    m.stream.reset();  // closes the connection
    m.buffer.clear();
    if (ec == beast::error::timeout) return late();
  }
  return Unavailable("the connection to " + address_ + " failed");
}

Status AnswerStatus(const HttpAnswer& a) {
  if (a.status / 100 == 2) return OkStatus();
  std::string message = a.body;
  rapidjson::Document doc;
  if (json::ParseJson(a.body, &doc).ok() && doc.IsObject() && doc.HasMember("error") &&
      doc["error"].IsString()) {
    message = doc["error"].GetString();
  }
  const std::string text = "HTTP " + std::to_string(a.status) + ": " + message;
  if (a.status == 404) return NotFound(text);
  if (a.status == 429) return ResourceExhausted(text);
  if (a.status == 401 || a.status == 403) return Status(StatusCode::kPermissionDenied, text);
  if (a.status == 408) return DeadlineExceeded(text);
  if (a.status / 100 == 4) return InvalidArgument(text);
  return Unavailable(text);
}

}  // namespace dais::cmd
