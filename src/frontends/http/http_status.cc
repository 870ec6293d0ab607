#include "frontends/http/http_status.h"

#include "tensor/infer_codec.h"

namespace dais::frontends::http {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
    case StatusCode::kAlreadyExists:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kCancelled:
      return 499;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
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
