// Tensor element types, named as KServe v2 does ("FP32") and as Triton's config does ("TYPE_FP32").
#pragma once

#include <cstddef>
#include <string_view>

namespace dais {

enum class DataType {
  kInvalid,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBf16,
  kBytes,
};

// "BOOL", "UINT8", ..., "FP32", "BF16", "BYTES"; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType type);
// Inverse of DataTypeName; kInvalid when unknown.
DataType DataTypeFromName(std::string_view name);
// From a model configuration name: "TYPE_FP32" -> kFp32, "TYPE_STRING" -> kBytes.
DataType DataTypeFromConfigName(std::string_view name);
// Size of one element in bytes; 0 for kBytes (variable) and kInvalid.
size_t DataTypeSize(DataType type);

}  // namespace dais
