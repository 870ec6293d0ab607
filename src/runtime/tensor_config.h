// Small conversions between the model configuration proto and dais tensor types.
#pragma once

#include <string>
#include <vector>

#include "dais/datatype.h"
#include "model_config.pb.h"

namespace dais::runtime {

inline DataType ConfigDataType(inference::DataType type) {
  return DataTypeFromConfigName(inference::DataType_Name(type));
}

// The dims the model itself sees for an input (reshape.shape when present, else dims).
inline std::vector<int64_t> ModelDims(const inference::ModelInput& in) {
  if (in.has_reshape()) return {in.reshape().shape().begin(), in.reshape().shape().end()};
  return {in.dims().begin(), in.dims().end()};
}

}  // namespace dais::runtime
