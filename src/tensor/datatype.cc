#include "dais/datatype.h"

#include <array>

namespace dais {
namespace {

struct DataTypeNames {
  DataType type;
  std::string_view name;         // KServe v2
  std::string_view config_name;  // Triton model configuration
  size_t size;
};

constexpr std::array<DataTypeNames, 14> kDataTypes = {{
    {DataType::kBool, "BOOL", "TYPE_BOOL", 1},
    {DataType::kUint8, "UINT8", "TYPE_UINT8", 1},
    {DataType::kUint16, "UINT16", "TYPE_UINT16", 2},
    {DataType::kUint32, "UINT32", "TYPE_UINT32", 4},
    {DataType::kUint64, "UINT64", "TYPE_UINT64", 8},
    {DataType::kInt8, "INT8", "TYPE_INT8", 1},
    {DataType::kInt16, "INT16", "TYPE_INT16", 2},
    {DataType::kInt32, "INT32", "TYPE_INT32", 4},
    {DataType::kInt64, "INT64", "TYPE_INT64", 8},
    {DataType::kFp16, "FP16", "TYPE_FP16", 2},
    {DataType::kFp32, "FP32", "TYPE_FP32", 4},
    {DataType::kFp64, "FP64", "TYPE_FP64", 8},
    {DataType::kBf16, "BF16", "TYPE_BF16", 2},
    {DataType::kBytes, "BYTES", "TYPE_STRING", 0},
}};

const DataTypeNames* Find(DataType type) {
  for (const DataTypeNames& entry : kDataTypes) {
    if (entry.type == type) return &entry;
  }
  return nullptr;
}

}  // namespace

std::string_view DataTypeName(DataType type) {
  const DataTypeNames* entry = Find(type);
  return entry != nullptr ? entry->name : "INVALID";
}

DataType DataTypeFromName(std::string_view name) {
  for (const DataTypeNames& entry : kDataTypes) {
    if (entry.name == name) return entry.type;
  }
  return DataType::kInvalid;
}

DataType DataTypeFromConfigName(std::string_view name) {
  for (const DataTypeNames& entry : kDataTypes) {
    if (entry.config_name == name) return entry.type;
  }
  return DataType::kInvalid;
}

size_t DataTypeSize(DataType type) {
  const DataTypeNames* entry = Find(type);
  return entry != nullptr ? entry->size : 0;
}

}  // namespace dais
