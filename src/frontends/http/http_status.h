// The one place where a dais Status becomes an HTTP answer.
#pragma once

#include <string>

#include "dais/status.h"
#include "frontends/http/http_server.h"

namespace dais::frontends::http {

// 400 bad input or state, 404 unknown, 409 conflict, 503 retry later, 504 timed out, ...
int HttpStatusFor(StatusCode code);

// A JSON body, as every endpoint answers.
Response JsonResponse(int status, std::string body);
// {"error": message} with HttpStatusFor(status.code()).
Response ErrorResponse(const Status& status);
// {"error": message} with an HTTP status that has no Status code (404 route, 405 method).
Response ErrorResponse(int http_status, const std::string& message);

}  // namespace dais::frontends::http
