#include "frontends/http/response_head.h"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>

#include "common/ascii.h"

namespace dais::frontends::http {
namespace {

bool Framing(std::string_view name) {
  return EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "transfer-encoding") ||
         EqualsIgnoreCase(name, "connection") || EqualsIgnoreCase(name, "server");
}

void AppendNumber(uint64_t n, std::string* out) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof(digits), n).ptr;
  out->append(digits, end);
}

}  // namespace

bool StatusHasBody(int status) { return status >= 200 && status != 204 && status != 304; }

void WriteResponseHead(const Response& r, size_t body_bytes, bool keep_alive,
                       std::string_view content_encoding, bool vary_accept_encoding,
                       std::string* out) {
  out->clear();
  out->append("HTTP/1.1 ");
  AppendNumber(static_cast<uint64_t>(r.status), out);
  out->push_back(' ');
  const auto reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(r.status));
  out->append(reason.data(), reason.size());
  out->append("\r\nServer: dais\r\n");
  const auto& h = r.headers;
  const bool own_type = std::any_of(h.begin(), h.end(), [](const auto& kv) {
    return EqualsIgnoreCase(kv.first, "content-type") && !HasLineBreak(kv.second);
  });
  if (!own_type && !r.content_type.empty() && !HasLineBreak(r.content_type)) {
    out->append("Content-Type: ").append(r.content_type).append("\r\n");
  }
  for (size_t i = 0; i < h.size(); ++i) {
    const auto& [k, v] = h[i];
    if (k.empty() || Framing(k) || HasLineBreak(k) || HasLineBreak(v)) continue;
    if (std::any_of(h.begin() + static_cast<std::ptrdiff_t>(i) + 1, h.end(),
                    [&k](const auto& later) { return EqualsIgnoreCase(later.first, k); })) {
      continue;  // set again below: the last one counts
    }
    if (!content_encoding.empty() && EqualsIgnoreCase(k, "content-encoding")) continue;
    if (vary_accept_encoding && EqualsIgnoreCase(k, "vary")) continue;
    out->append(k).append(": ").append(v).append("\r\n");
  }
  if (vary_accept_encoding) out->append("Vary: Accept-Encoding\r\n");
  if (!content_encoding.empty()) {
    out->append("Content-Encoding: ").append(content_encoding).append("\r\n");
  }
  if (StatusHasBody(r.status)) {
    out->append("Content-Length: ");
    AppendNumber(body_bytes, out);
    out->append("\r\n");
  }
  if (!keep_alive) out->append("Connection: close\r\n");
  out->append("\r\n");
}

}  // namespace dais::frontends::http
