#include "frontends/http/http_status.h"

#include <utility>

#include "frontends/http/infer_codec.h"

namespace dais::frontends::http {

int HttpStatusFor(StatusCode code) {
  // What the client should do: fix the request (4xx), retry later (503), or report (500).
  static constexpr std::pair<StatusCode, int> kTable[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kFailedPrecondition, 400},
      {StatusCode::kOutOfRange, 400},
      {StatusCode::kAlreadyExists, 400},
      {StatusCode::kUnauthenticated, 401},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAborted, 409},
      {StatusCode::kCancelled, 499},
      {StatusCode::kUnimplemented, 501},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kResourceExhausted, 503},
      {StatusCode::kDeadlineExceeded, 504},
  };
  for (const auto& [c, http] : kTable) {
    if (c == code) return http;
  }
  return 500;  // Internal, Unknown, DataLoss
}

Response JsonResponse(int status, std::string body) {
  return Response{status, "application/json", std::move(body), {}};
}

Response ErrorResponse(const Status& status) {
  return ErrorResponse(HttpStatusFor(status.code()), status.message());
}

Response ErrorResponse(int http_status, const std::string& message) {
  return JsonResponse(http_status, ErrorJson(message));
}

}  // namespace dais::frontends::http
