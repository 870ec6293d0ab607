// What `dais perf` learns about the model before sending load: its inputs and outputs (from the
// KServe v2 model metadata) and whether it batches (max_batch_size from the model configuration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/datatype.h"

namespace dais::perf {

struct TensorSpec {
  std::string name;
  std::string datatype;  // as the server wrote it ("FP32")
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;  // -1: variable
};

struct ModelInfo {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // From the configuration; -1 when the server has no config endpoint (then a leading -1 in
  // every input shape is taken to mean batching).
  int64_t max_batch_size = -1;
};

// One input of one request: raw little-endian row-major bytes (BYTES: each element a 4-byte
// little-endian length followed by its bytes), the form of the binary extension and of gRPC's
// raw_input_contents.
struct InputTensor {
  std::string name;
  std::string datatype;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string bytes;
};

// The inputs of one request.
using RequestInputs = std::vector<InputTensor>;

}  // namespace dais::perf
