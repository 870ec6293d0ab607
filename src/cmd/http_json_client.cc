#include "cmd/http_json_client.h"

#include <rapidjson/document.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/json.h"

namespace dais::cmd {

namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = boost::asio::ip::tcp;

struct HttpJsonClient::Impl {
  std::string token, host, port;
  boost::asio::io_context io;
  tcp::socket socket{io};
  beast::flat_buffer buffer;

  // The socket's send and receive timeouts: what is left until `deadline` (at least 1 ms).
  void SetTimeouts(std::chrono::steady_clock::time_point deadline) {
    using namespace std::chrono;
    if (deadline == steady_clock::time_point::max()) return;
    const auto left = std::max<int64_t>(
        1000, duration_cast<microseconds>(deadline - steady_clock::now()).count());
    timeval tv{static_cast<time_t>(left / 1000000), static_cast<suseconds_t>(left % 1000000)};
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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

StatusOr<HttpAnswer> HttpJsonClient::Call(const std::string& method, const std::string& target,
                                          std::string body,
                                          std::chrono::steady_clock::time_point deadline) {
  Impl& m = *impl_;
  bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
  req.set(bhttp::field::host, m.host);
  req.set(bhttp::field::content_type, "application/json");
  if (!m.token.empty()) req.set(bhttp::field::authorization, "Bearer " + m.token);
  req.body() = std::move(body);
  req.prepare_payload();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("no answer from " + address_ + " before the deadline");
    }
    beast::error_code ec;
    if (!m.socket.is_open()) {
      tcp::resolver resolver(m.io);
      auto endpoints = resolver.resolve(m.host, m.port, ec);
      if (!ec) boost::asio::connect(m.socket, endpoints, ec);
      if (ec) return Unavailable("cannot connect to " + address_ + ": " + ec.message());
      m.socket.set_option(tcp::no_delay(true), ec);
    }
    m.SetTimeouts(deadline);
    bhttp::write(m.socket, req, ec);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1ull << 32);
    if (!ec) bhttp::read(m.socket, m.buffer, parser, ec);
    if (!ec) {
      auto res = parser.release();
      if (!res.keep_alive()) m.socket.close(ec);
      return HttpAnswer{static_cast<int>(res.result_int()), std::move(res.body())};
    }
    m.socket.close();
    m.buffer.clear();
    if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again ||
        ec == boost::asio::error::timed_out) {
      return DeadlineExceeded("no answer from " + address_ + " before the deadline");
    }
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
  if (a.status / 100 == 4) return InvalidArgument(text);
  return Unavailable(text);
}

}  // namespace dais::cmd
