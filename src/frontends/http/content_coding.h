// HTTP content codings (RFC 9110 §8.4): which coding a request body arrived in
// (Content-Encoding) and which one to answer in (Accept-Encoding). dais speaks gzip and deflate
// (zlib), as tritonclient's request_compression_algorithm / response_compression_algorithm do.
#pragma once

#include <optional>
#include <string_view>

#include "common/zlib_codec.h"
#include "dais/status.h"

namespace dais::frontends::http {

// The coding of a request body from its Content-Encoding value: nullopt for none / "identity";
// gzip ("gzip", "x-gzip") or deflate. A list of several codings or any other coding is
// Unimplemented (the server answers 415 naming the codings it accepts).
StatusOr<std::optional<ZlibFormat>> RequestCoding(std::string_view content_encoding);

// The coding to answer in from an Accept-Encoding value, or nullopt (identity): gzip when
// acceptable ("gzip", "x-gzip" or "*" with q > 0), else deflate; q=0 refuses a coding.
std::optional<ZlibFormat> AnswerCoding(std::string_view accept_encoding);

// A request's Transfer-Encoding (RFC 9112 §6): only "chunked" alone is accepted. InvalidArgument
// (400, and the connection closes) when the final coding is not chunked, as in "chunked,
// identity": without it the body's end is unknown and the rest of the stream would be read as a
// second request (issue 32: one request, two answers); Unimplemented (501) for another coding
// before chunked ("gzip, chunked"). Several header lines are one list, joined with commas.
Status CheckTransferEncoding(std::string_view transfer_encoding);

}  // namespace dais::frontends::http
