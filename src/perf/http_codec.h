// The KServe v2 HTTP bodies `dais perf` writes and reads: inference request bodies (JSON or the
// binary tensor data extension), model metadata, configuration and statistics answers. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dais/status.h"
#include "perf/model_info.h"
#include "perf/stats.h"

namespace dais::perf {

struct InferBody {
  std::string body;
  size_t header_length = 0;  // > 0: send Inference-Header-Content-Length with this value
};
// JSON: inputs as flat "data" arrays, outputs left to the server (JSON). Binary: inputs with
// parameters.binary_data_size after the JSON header, and "binary_data_output": true.
InferBody BuildInferBody(const RequestInputs& inputs, bool binary);

// GET /v2/models/{m}: name, versions, platform, inputs, outputs. InvalidArgument if malformed.
StatusOr<ModelInfo> ParseModelMetadata(std::string_view json);
// GET /v2/models/{m}/config: max_batch_size (0 when absent, as proto3 JSON omits zeros).
StatusOr<int64_t> ParseMaxBatchSize(std::string_view json);
// GET /v2/models/{m}/stats: Triton's {"model_stats": [...]}, summed over the entries.
StatusOr<ServerStats> ParseModelStatistics(std::string_view json);
// The "error" string of an error answer, or the body itself (shortened) when it has none.
std::string ErrorText(std::string_view body);

}  // namespace dais::perf
