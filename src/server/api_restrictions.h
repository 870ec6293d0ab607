// Restricted APIs, as tritonserver's --http-restricted-api and --grpc-restricted-protocol: groups
// of endpoints that answer only requests carrying a given header with a given value, so that,
// for example, repository control stays away from clients that may only infer. Both frontends
// map each endpoint to its group and ask Check here; the rule is the same for both.
//
// Flag syntax (repeatable; an API in one group only):
//   <api>[,<api>...]:<key>=<value>
// APIs: health, metadata, inference, shared-memory, model-config, model-repository, statistics,
// trace, logging (Triton's), features (dais's Feast endpoints) and memory (vector memory,
// docs/memory.md). The header checked is <key>
// over HTTP and triton-grpc-protocol-<key> over gRPC (names compared without case, values
// exactly).
//
// Thread-safety: immutable once parsed; Check may be called from any thread.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::server {

enum class ApiGroup {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
  kFeatures,
  kMemory,
};
inline constexpr size_t kApiGroupCount = 11;

// "health", "model-repository", ...
std::string_view ApiGroupName(ApiGroup group);

class ApiRestrictions {
 public:
  // No API restricted.
  ApiRestrictions() = default;

  // Parses the values of `flag` (e.g. "--http-restricted-api"); `header_prefix` is put before
  // each key to name the header checked ("" for HTTP, "triton-grpc-protocol-" for gRPC).
  // InvalidArgument naming the flag and the fault: a missing ':' or '=', an empty part, an
  // unknown API, an API in two groups.
  static StatusOr<ApiRestrictions> Parse(const std::vector<std::string>& specs,
                                         std::string_view flag, std::string_view header_prefix);

  // The value of a request header by lower-case name, or nullopt when absent.
  using HeaderLookup = std::function<std::optional<std::string_view>(std::string_view name)>;
  // OK when `group` is open or the request carries its header with its value; otherwise
  // PermissionDenied "This API is restricted, expecting header '<header>'" (HTTP answers 403;
  // gRPC answers UNAVAILABLE, as Triton does).
  Status Check(ApiGroup group, const HeaderLookup& header) const;

  // The header (lower-case) that `group` requires, or nullptr when the group is open.
  const std::string* RequiredHeader(ApiGroup group) const;

 private:
  struct Rule {
    std::string header;  // lower-case
    std::string value;
  };
  std::array<std::optional<Rule>, kApiGroupCount> rules_;
};

}  // namespace dais::server
