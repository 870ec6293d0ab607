// Durations as written in specs and flags: "250ms", "30s", "10m", "1h", "7d"; a bare number is
// seconds. Shared by features.yaml, training.yaml and the control plane's specs.
#pragma once

#include <cstdint>
#include <string_view>

#include "dais/status.h"

namespace dais {

// Microseconds; InvalidArgument naming the text ("\"1y\": unknown unit ...").
StatusOr<int64_t> ParseDurationUs(std::string_view text);

}  // namespace dais
