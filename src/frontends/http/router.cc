#include "frontends/http/router.h"

#include "frontends/http/http_status.h"

namespace dais::frontends::http {

const std::string& RouteParams::Get(std::string_view name) const {
  static const std::string kEmpty;
  for (const auto& [k, v] : values_) {
    if (k == name) return v;
  }
  return kEmpty;
}

std::vector<std::string_view> PathSegments(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j;
  }
  return parts;
}

void Router::Add(std::string method, std::string_view pattern, Route route) {
  Entry e{std::move(method), {}, std::move(route)};
  for (std::string_view s : PathSegments(pattern)) e.segments.emplace_back(s);
  routes_.push_back(std::move(e));
}

bool Router::Match(const Entry& e, const std::vector<std::string_view>& path, RouteParams* params) {
  if (e.segments.size() != path.size()) return false;
  params->values_.clear();
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& s = e.segments[i];
    if (s.size() > 2 && s.front() == '{' && s.back() == '}') {
      params->values_.emplace_back(s.substr(1, s.size() - 2), std::string(path[i]));
    } else if (s != path[i]) {
      return false;
    }
  }
  return true;
}

void Router::Dispatch(Request& request, Responder& respond) const {
  const std::vector<std::string_view> path = PathSegments(request.path);
  RouteParams params;
  bool other_method = false;
  for (const Entry& e : routes_) {
    if (!Match(e, path, &params)) continue;
    if (e.method == "*" || e.method == request.method) return e.route(request, params, respond);
    other_method = true;
  }
  if (other_method) {
    return respond(
        ErrorResponse(405, "method " + request.method + " not allowed on " + request.path));
  }
  respond(ErrorResponse(404, "not found: " + request.path +
                                 (not_found_hint_.empty() ? "" : " (" + not_found_hint_ + ")")));
}

}  // namespace dais::frontends::http
