// Input tensors for the load: shapes resolved from the model's metadata, values generated
// (random or zero) or read from a perf_analyzer-style JSON file. Pure functions, no I/O except
// LoadInputDataFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "perf/model_info.h"

namespace dais::perf {

// The shape of every input for `batch_size`: when the model batches (max_batch_size > 0, or
// unknown (-1) and the first dimension is -1), a leading -1 becomes `batch_size`; any other -1
// becomes 1. A non-batching model keeps its shape (-1 -> 1) and accepts only batch size 1.
// InvalidArgument if the batch size is not accepted (over max_batch_size, or > 1 for a model
// that does not batch) or a datatype is not supported.
struct ResolvedInput {
  TensorSpec spec;
  std::vector<int64_t> shape;  // full request shape, batch dimension included
  bool batched = false;        // shape[0] is the batch dimension
};
StatusOr<std::vector<ResolvedInput>> ResolveInputs(const ModelInfo& model, int64_t batch_size);

enum class DataMode { kRandom, kZero };

// One request's inputs with generated values. Random values are a function of `seed` only:
// floats uniform in [0, 1), integers uniform in [0, 127], BOOL 0/1, BYTES lowercase ASCII
// strings of `string_length` characters (zero: strings of '0').
RequestInputs GenerateInputs(const std::vector<ResolvedInput>& inputs, DataMode mode, uint64_t seed,
                             int64_t string_length);

// Perf_analyzer's JSON input format, simple forms:
//   {"data": [{"INPUT0": [1, 2, 3], "INPUT1": {"content": [..], "shape": [3]}}, ...]}
// Each entry of "data" is one request. Values are flat or nested lists (flattened) of numbers,
// booleans or, for BYTES, strings; for a batching model they describe one batch element and are
// repeated for every element of the batch. With "shape" the given shape (without the batch
// dimension) replaces the model's; without it the values must fill the resolved shape.
// InvalidArgument naming the entry and input for a missing input, a wrong count or type.
StatusOr<std::vector<RequestInputs>> ParseInputDataJson(std::string_view json,
                                                        const std::vector<ResolvedInput>& inputs);
// Reads the file and calls ParseInputDataJson; NotFound if it cannot be read.
StatusOr<std::vector<RequestInputs>> LoadInputDataFile(const std::string& path,
                                                       const std::vector<ResolvedInput>& inputs);

}  // namespace dais::perf
