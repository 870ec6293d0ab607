// Feature values as bytes: every element is stored little-endian in its datatype's width
// (docs/features.md, "Storage format"). The host must be little-endian (checked at compile time),
// so encoding is a copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dais/datatype.h"
#include "dais/status.h"

namespace dais::features {

// A number as it came from JSON or YAML.
struct Scalar {
  bool is_int = false;
  int64_t i = 0;
  double d = 0.0;
  static Scalar Int(int64_t v) { return {true, v, static_cast<double>(v)}; }
  static Scalar Real(double v) { return {false, 0, v}; }
};

// Datatypes a feature may have: BOOL, INT8, UINT8, INT32, INT64, FP32, FP64.
bool IsFeatureType(DataType type);

// Appends one element. InvalidArgument when the value does not fit the type (a fraction for an
// integer type, out of range, not 0/1 for BOOL).
Status AppendElement(DataType type, const Scalar& value, std::string* out);

// Reads element `index` of a little-endian array of `type`.
double ElementAsDouble(DataType type, const char* data, int64_t index);
int64_t ElementAsInt(DataType type, const char* data, int64_t index);
inline bool IsIntegerType(DataType t) { return t != DataType::kFp32 && t != DataType::kFp64; }

// Converts `count` elements from `from` to `to` (numeric casts, as C++ static_cast).
// `to` may be any fixed-size numeric tensor type (incl. FP16/BF16 is not supported: Unimplemented).
Status ConvertElements(DataType from, const char* src, DataType to, char* dst, int64_t count);

}  // namespace dais::features
