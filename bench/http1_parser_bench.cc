// The gateway's HTTP/1.1 request framing (frontends/http/http1_parser.h, llhttp) against Beast's
// parser on the same bytes: a KServe v2 inference request as a client sends it (head with a bearer
// token, 1 KiB JSON body), 16 of them pipelined in one buffer. Prints nanoseconds and heap
// allocations per request (operator new counted in this process), and the ratio to Beast's
// `request_parser<string_body>` (what the gateway's serving path uses today) and to a
// `basic_parser` with no-op callbacks (Beast without its containers: the other candidate).
//
// Usage: http1_parser_bench [--seconds 2]
#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "frontends/http/http1_parser.h"

namespace {

std::atomic<uint64_t> g_allocations{0};

}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

std::string Request() {
  std::string body = R"({"inputs":[{"name":"INPUT0","shape":[1,64],"datatype":"FP32","data":[)";
  for (int i = 0; i < 64; ++i) body += (i ? "," : "") + std::to_string(0.125 * i);
  body += "]}]}";
  body.resize(1024, ' ');
  return "POST /v2/models/fraud/infer HTTP/1.1\r\nHost: gateway.internal:8000\r\n"
         "User-Agent: python-requests/2.28.1\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\n"
         "Connection: keep-alive\r\nContent-Type: application/json\r\n"
         "Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEifQ.eyJzdWIiOiJ1c2VyLTQyIiwidGVu"
         "YW50IjoiYWNtZSIsImV4cCI6MTg5MzQ1NjAwMH0.c2lnbmF0dXJlLWJ5dGVzLWhlcmU\r\n"
         "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Beast's parser without its containers: the callbacks take the views and keep nothing.
class NullParser : public http::basic_parser<true> {
 public:
  size_t fields = 0;

 private:
  void on_request_impl(http::verb, boost::beast::string_view, boost::beast::string_view, int,
                       boost::beast::error_code&) override {}
  void on_response_impl(int, boost::beast::string_view, int, boost::beast::error_code&) override {}
  void on_field_impl(http::field, boost::beast::string_view, boost::beast::string_view,
                     boost::beast::error_code&) override {
    ++fields;
  }
  void on_header_impl(boost::beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&,
                         boost::beast::error_code&) override {}
  size_t on_body_impl(boost::beast::string_view s, boost::beast::error_code&) override {
    return s.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view,
                            boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view s,
                            boost::beast::error_code&) override {
    return s.size();
  }
  void on_finish_impl(boost::beast::error_code&) override {}
};

struct Result {
  double ns_per_request;
  double allocations_per_request;
};

// Runs `parse_all(wire)` (which parses every request in `wire` and returns how many) for
// `seconds`.
template <typename F>
Result Measure(const std::string& wire, double seconds, F parse_all) {
  uint64_t requests = 0;
  const uint64_t allocations_before = g_allocations.load();
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (int i = 0; i < 100; ++i) requests += parse_all(wire);
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  return {ns / requests, static_cast<double>(g_allocations.load() - allocations_before) / requests};
}

size_t ParseLlhttp(const std::string& wire) {
  dais::frontends::http::Http1RequestParser p;
  std::string_view rest = wire;
  size_t done = 0;
  while (!rest.empty()) {
    auto r = p.Parse(rest);
    rest.remove_prefix(r.consumed);
    if (r.stop == dais::frontends::http::Http1RequestParser::Stop::kMessageComplete) {
      ++done;
      p.Reset();
    } else if (r.stop != dais::frontends::http::Http1RequestParser::Stop::kHeadComplete) {
      std::fprintf(stderr, "llhttp: %s\n", p.error().c_str());
      std::exit(1);
    }
  }
  return done;
}

template <typename Parser>
size_t ParseBeast(const std::string& wire) {
  size_t done = 0;
  boost::asio::const_buffer rest(wire.data(), wire.size());
  while (rest.size() > 0) {
    Parser p;
    p.body_limit(1 << 20);
    while (!p.is_done()) {
      boost::beast::error_code ec;
      const size_t n = p.put(rest, ec);
      if (ec) {
        std::fprintf(stderr, "beast: %s\n", ec.message().c_str());
        std::exit(1);
      }
      rest += n;
    }
    ++done;
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--seconds") seconds = std::atof(argv[i + 1]);
  }
  std::string wire;
  for (int i = 0; i < 16; ++i) wire += Request();
  std::printf("one request: %zu bytes (head %zu), 16 pipelined in one buffer\n\n", wire.size() / 16,
              Request().find("\r\n\r\n") + 4);
  // Warm-up: each parser once over the buffer for a tenth of the time (caches, branch predictors).
  Measure(wire, seconds / 10, ParseBeast<http::request_parser<http::string_body>>);
  Measure(wire, seconds / 10, ParseBeast<NullParser>);
  Measure(wire, seconds / 10, ParseLlhttp);
  const Result beast = Measure(wire, seconds, ParseBeast<http::request_parser<http::string_body>>);
  const Result null_beast = Measure(wire, seconds, ParseBeast<NullParser>);
  const Result llhttp = Measure(wire, seconds, ParseLlhttp);
  std::printf(
      "| parser | ns per request | vs Beast request_parser | heap allocations per request |\n");
  std::printf("|---|---:|---:|---:|\n");
  auto row = [&](const char* name, const Result& r) {
    std::printf("| %s | %.0f | %.2fx | %.2f |\n", name, r.ns_per_request,
                beast.ns_per_request / r.ns_per_request, r.allocations_per_request);
  };
  row("Beast request_parser<string_body> (the gateway today)", beast);
  row("Beast basic_parser, no-op callbacks", null_beast);
  row("dais Http1RequestParser (llhttp)", llhttp);
  return 0;
}
