// State shared by the frontends of one `dais serve` process: drain flag and in-flight count
// (SIGTERM handling), and what the server says about itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace dais {

inline constexpr const char* kServerName = "dais";
inline constexpr const char* kServerVersion = "0.1.0";
// Protocol extensions both frontends implement (ServerMetadata / GET /v2).
inline const std::vector<const char*>& ServerExtensions() {
  static const std::vector<const char*> kExtensions = {"binary_tensor_data", "model_repository",
                                                       "statistics", "model_configuration"};
  return kExtensions;
}

struct ServerState {
  // Set on SIGTERM: readiness false, new inference / repository requests refused.
  std::atomic<bool> draining{false};
  // Inference and repository requests accepted and not yet answered, over all frontends.
  std::atomic<int64_t> in_flight{0};
};

}  // namespace dais
