// A route: what the gateway does with requests for a model name clients use (the alias). Kept in
// etcd at /dais/routes/<alias> (written by `dais ctl apply -f route.yaml`; docs/gateway.md):
//
//   kind: route
//   name: ranker                  # the alias: clients call /v2/models/ranker/infer
//   model: mlp_small              # the model the nodes serve (default: the alias)
//   versions:                     # weights sum to 100
//     - {version: 1, weight: 90}
//     - {version: 2, weight: 10}
//   stable: 1                     # answers when the chosen version has no READY instance
//                                 # (default: the first version listed)
//   sticky_header: x-user-id      # optional: one user, one version (consistent hashing)
//   match:                        # optional A/B rules, first match wins, before the weights
//     - {header: x-group, value: beta, version: 2}
//   timeout_ms: 2000              # per request, all tries included (default 10000)
//   try_timeout_ms: 300           # optional: a try taking longer is abandoned and tried on
//                                 # another node (and counts as the node's failure)
//   shadow: {version: 2, percent: 5}  # optional: a copy of 5 % of the requests also goes to
//                                 # version 2; its answers are discarded, its outcomes counted
//
// Version choice: a request that names a version in its path gets it; else the first matching
// rule; else a bucket in [0, 10000) (the sticky header's hash, or a random number) walks the
// versions from the last listed to the first, each taking weight x 100 buckets. The canary is
// listed last, so raising its weight only moves users onto it: a sticky user already on the
// canary stays there while it grows.
//
// Thread-safety: a RouteSpec is a value; ChooseVersion is a pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::gateway {

inline constexpr const char* kRoutesPrefix = "/dais/routes/";
// A route or tenant document larger than this is refused, at `ctl apply` and when a gateway
// reads it (issue 32: one 1.4 MB malformed route cost every gateway ~0.46 s a later event).
inline constexpr size_t kMaxSpecDocumentBytes = 64 * 1024;
inline constexpr int kBuckets = 10000;

struct RouteSpec {
  struct Weighted {
    int64_t version = 0;
    int weight = 0;  // percent
  };
  struct Match {
    std::string header;  // lower-case
    std::string value;
    int64_t version = 0;
  };
  std::string name;
  std::string model;
  std::vector<Weighted> versions;
  int64_t stable = -1;
  std::string sticky_header;  // lower-case; empty: none
  std::vector<Match> match;
  int timeout_ms = 10000;
  int try_timeout_ms = 0;       // 0: a try may take the whole timeout
  int64_t shadow_version = -1;  // -1: no shadow
  double shadow_percent = 0;
};

// Parses and validates a route (YAML, or the JSON RouteToJson writes): unknown fields, weights
// that do not sum to 100, a stable or rule version not among the versions... are InvalidArgument
// naming the field.
StatusOr<RouteSpec> ParseRoute(const std::string& text);
std::string RouteToJson(const RouteSpec& r);

struct VersionChoice {
  int64_t version = -1;
  // How: "path", "match", "sticky" or "weight".
  const char* how = "weight";
};

// `header(name)` returns a request header's value (name lower-case) or empty; `random` is a
// uniformly random number (used when no sticky header value decides).
VersionChoice ChooseVersion(const RouteSpec& route, int64_t path_version,
                            const std::function<std::string_view(std::string_view)>& header,
                            uint64_t random);

// The bucket of a sticky key for a route: a stable 64-bit hash, independent of the process.
int StickyBucket(std::string_view route, std::string_view key);

}  // namespace dais::gateway
