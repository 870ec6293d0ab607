// An answer's HTTP/1.1 head written by hand into a buffer the connection reuses, sent with the
// body in one gathered write (http_server.cc): Beast's serializer walked each field through
// iterator adaptors, a visible share of a small request's CPU (issue 37).
#pragma once

#include <string>
#include <string_view>

#include "frontends/http/http_server.h"

namespace dais::frontends::http {

// Appends to `out` (cleared first): the status line (HTTP/1.1 and the status's reason), Server:
// dais, Content-Type (unless a header of `r` sets it), `r.headers` (a name given twice: the last
// one; the ones that frame the message -- Content-Length, Transfer-Encoding, Connection,
// Server -- are the server's own and skipped, as is any with a line break), Content-Encoding
// and Vary when given, Content-Length (not for 1xx, 204 and 304, whose body must be empty),
// Connection: close unless kept alive, and the empty line.
void WriteResponseHead(const Response& r, size_t body_bytes, bool keep_alive,
                       std::string_view content_encoding, bool vary_accept_encoding,
                       std::string* out);

// Whether an answer with this status carries a body (not 1xx, 204, 304).
bool StatusHasBody(int status);

}  // namespace dais::frontends::http
