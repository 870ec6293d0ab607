#include "features/spec/feature_codec.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "fmt/format.h"

namespace dais::features {

static_assert(std::endian::native == std::endian::little,
              "feature values are stored little-endian; a big-endian port must byte-swap");

namespace {

template <typename T>
void Put(T v, std::string* out) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

template <typename T>
T Get(const char* data, int64_t index) {
  T v;
  std::memcpy(&v, data + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <typename T>
Status PutInt(const Scalar& v, std::string* out, std::string_view type) {
  int64_t i;
  if (v.is_int) {
    i = v.i;
  } else {
    if (!std::isfinite(v.d) || std::trunc(v.d) != v.d) {
      return InvalidArgument(fmt::format("{} is not an integer ({})", v.d, type));
    }
    if (v.d < -9.2e18 || v.d > 9.2e18) {
      return InvalidArgument(fmt::format("{} is out of range for {}", v.d, type));
    }
    i = static_cast<int64_t>(v.d);
  }
  if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
    return InvalidArgument(fmt::format("{} is out of range for {}", i, type));
  }
  Put(static_cast<T>(i), out);
  return OkStatus();
}

template <typename To>
void ConvertTo(DataType from, const char* src, To* dst, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    if (IsIntegerType(from)) {
      dst[k] = static_cast<To>(ElementAsInt(from, src, k));
    } else {
      dst[k] = static_cast<To>(ElementAsDouble(from, src, k));
    }
  }
}

}  // namespace

bool IsFeatureType(DataType type) {
  switch (type) {
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFp32:
    case DataType::kFp64:
      return true;
    default:
      return false;
  }
}

Status AppendElement(DataType type, const Scalar& v, std::string* out) {
  std::string_view name = DataTypeName(type);
  switch (type) {
    case DataType::kBool: {
      double d = v.is_int ? static_cast<double>(v.i) : v.d;
      if (d != 0.0 && d != 1.0) {
        return InvalidArgument(fmt::format("{} is not a BOOL (0/1, false/true)", d));
      }
      Put<uint8_t>(d != 0.0, out);
      return OkStatus();
    }
    case DataType::kInt8:
      return PutInt<int8_t>(v, out, name);
    case DataType::kUint8:
      return PutInt<uint8_t>(v, out, name);
    case DataType::kInt32:
      return PutInt<int32_t>(v, out, name);
    case DataType::kInt64:
      return PutInt<int64_t>(v, out, name);
    case DataType::kFp32: {
      double d = v.is_int ? static_cast<double>(v.i) : v.d;
      if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) {
        return InvalidArgument(fmt::format("{} is out of range for FP32", d));
      }
      Put(static_cast<float>(d), out);
      return OkStatus();
    }
    case DataType::kFp64:
      Put(v.is_int ? static_cast<double>(v.i) : v.d, out);
      return OkStatus();
    default:
      return InvalidArgument(fmt::format("{} is not a feature datatype", name));
  }
}

double ElementAsDouble(DataType type, const char* data, int64_t index) {
  switch (type) {
    case DataType::kFp32:
      return Get<float>(data, index);
    case DataType::kFp64:
      return Get<double>(data, index);
    default:
      return static_cast<double>(ElementAsInt(type, data, index));
  }
}

int64_t ElementAsInt(DataType type, const char* data, int64_t index) {
  switch (type) {
    case DataType::kBool:
    case DataType::kUint8:
      return Get<uint8_t>(data, index);
    case DataType::kInt8:
      return Get<int8_t>(data, index);
    case DataType::kInt32:
      return Get<int32_t>(data, index);
    case DataType::kInt64:
      return Get<int64_t>(data, index);
    default:
      return static_cast<int64_t>(ElementAsDouble(type, data, index));
  }
}

Status ConvertElements(DataType from, const char* src, DataType to, char* dst, int64_t n) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(n) * DataTypeSize(to));
    return OkStatus();
  }
  switch (to) {
    case DataType::kBool:
    case DataType::kUint8:
      ConvertTo(from, src, reinterpret_cast<uint8_t*>(dst), n);
      break;
    case DataType::kInt8:
      ConvertTo(from, src, reinterpret_cast<int8_t*>(dst), n);
      break;
    case DataType::kInt16:
      ConvertTo(from, src, reinterpret_cast<int16_t*>(dst), n);
      break;
    case DataType::kInt32:
      ConvertTo(from, src, reinterpret_cast<int32_t*>(dst), n);
      break;
    case DataType::kInt64:
      ConvertTo(from, src, reinterpret_cast<int64_t*>(dst), n);
      break;
    case DataType::kFp32:
      ConvertTo(from, src, reinterpret_cast<float*>(dst), n);
      break;
    case DataType::kFp64:
      ConvertTo(from, src, reinterpret_cast<double*>(dst), n);
      break;
    default:
      return Unimplemented(fmt::format("features cannot fill a {} input", DataTypeName(to)));
  }
  return OkStatus();
}

}  // namespace dais::features
