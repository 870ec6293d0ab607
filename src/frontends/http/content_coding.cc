#include "frontends/http/content_coding.h"

#include <cctype>
#include <string>
#include <vector>

#include "common/ascii.h"

namespace dais::frontends::http {
namespace {

// A qvalue (RFC 9110 §12.4.2) is zero when it is "0", "0.", "0.0", ... ("q=0" refuses).
bool QIsZero(std::string_view params) {
  while (!params.empty()) {
    const size_t semi = params.find(';');
    std::string_view p = TrimOws(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || std::tolower(static_cast<unsigned char>(p[0])) != 'q' || p[1] != '=') {
      continue;
    }
    std::string_view v = p.substr(2);
    if (v.empty() || v[0] != '0') return false;
    for (char c : v.substr(1)) {
      if (c != '.' && c != '0') return false;
    }
    return true;
  }
  return false;
}

}  // namespace

StatusOr<std::optional<ZlibFormat>> RequestCoding(std::string_view content_encoding) {
  const std::string_view v = TrimOws(content_encoding);
  if (v.empty() || EqualsIgnoreCase(v, "identity")) return std::optional<ZlibFormat>();
  if (EqualsIgnoreCase(v, "gzip") || EqualsIgnoreCase(v, "x-gzip")) {
    return std::optional<ZlibFormat>(ZlibFormat::kGzip);
  }
  if (EqualsIgnoreCase(v, "deflate")) return std::optional<ZlibFormat>(ZlibFormat::kZlib);
  return Unimplemented("Content-Encoding '" + std::string(v) +
                       "' is not supported: send the body as gzip, deflate or identity");
}

std::optional<ZlibFormat> AnswerCoding(std::string_view accept_encoding) {
  // Each coding: unnamed, refused (q=0) or acceptable.
  std::optional<bool> gzip;
  std::optional<bool> deflate;
  bool any = false;
  while (!accept_encoding.empty()) {
    const size_t comma = accept_encoding.find(',');
    std::string_view item = accept_encoding.substr(0, comma);
    accept_encoding =
        comma == std::string_view::npos ? std::string_view() : accept_encoding.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = TrimOws(item.substr(0, semi));
    const bool ok = semi == std::string_view::npos || !QIsZero(item.substr(semi + 1));
    if (EqualsIgnoreCase(coding, "gzip") || EqualsIgnoreCase(coding, "x-gzip")) {
      gzip = ok;
    } else if (EqualsIgnoreCase(coding, "deflate")) {
      deflate = ok;
    } else if (coding == "*") {
      any = ok;
    }
  }
  if (gzip.value_or(any)) return ZlibFormat::kGzip;
  if (deflate.value_or(any)) return ZlibFormat::kZlib;
  return std::nullopt;
}

Status CheckTransferEncoding(std::string_view te) {
  std::vector<std::string> codings;
  while (!te.empty()) {
    const size_t comma = te.find(',');
    std::string_view item = TrimOws(te.substr(0, comma));
    te = comma == std::string_view::npos ? std::string_view() : te.substr(comma + 1);
    if (item.empty()) continue;
    std::string lower(item);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    codings.push_back(std::move(lower));
  }
  if (codings.empty() || codings.back() != "chunked") {
    return InvalidArgument(
        "Transfer-Encoding: the final coding of a request must be chunked (RFC 9112 section 6.3)");
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (codings[i] == "chunked") {
      return InvalidArgument("Transfer-Encoding: chunked may be applied only once");
    }
    return Unimplemented("Transfer-Encoding '" + codings[i].substr(0, 40) +
                         "' is not implemented (only chunked)");
  }
  return OkStatus();
}

}  // namespace dais::frontends::http
