// Routes an HTTP request by method and path pattern to its handler. A pattern is a path whose
// segments are literals or "{name}" captures: "/v2/models/{model}/versions/{version}/infer".
// A path that matches some pattern under another method answers 405, one that matches none 404.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontends/http/http_server.h"

namespace dais::frontends::http {

// The captured segments of the matched pattern.
class RouteParams {
 public:
  // The segment captured as `name`, or "" when the pattern has no such capture.
  const std::string& Get(std::string_view name) const;

 private:
  friend class Router;
  std::vector<std::pair<std::string, std::string>> values_;
};

class Router {
 public:
  using Route = std::function<void(Request&, const RouteParams&, Responder&)>;

  // `method` "*" matches every method. Routes are tried in the order they were added.
  void Add(std::string method, std::string_view pattern, Route route);
  // Calls the route for `request`, or answers 404 / 405.
  void Dispatch(Request& request, Responder& respond) const;
  // Appended to the 404 message, e.g. what this listener serves.
  void SetNotFoundHint(std::string hint) { not_found_hint_ = std::move(hint); }

 private:
  struct Entry {
    std::string method;
    std::vector<std::string> segments;  // "{name}" captures one segment
    Route route;
  };
  static bool Match(const Entry& e, const std::vector<std::string_view>& path, RouteParams* params);
  std::vector<Entry> routes_;
  std::string not_found_hint_;
};

// The non-empty '/'-separated segments of `path`.
std::vector<std::string_view> PathSegments(std::string_view path);

}  // namespace dais::frontends::http
