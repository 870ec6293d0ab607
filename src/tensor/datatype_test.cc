#include "dais/datatype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dais/tensor.h"
#include "tensor/half.h"

namespace dais {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  const std::vector<DataType> all = {
      DataType::kBool, DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64,
      DataType::kInt8, DataType::kInt16, DataType::kInt32,  DataType::kInt64,  DataType::kFp16,
      DataType::kFp32, DataType::kFp64,  DataType::kBf16,   DataType::kBytes};
  for (DataType type : all) {
    EXPECT_EQ(DataTypeFromName(DataTypeName(type)), type) << DataTypeName(type);
  }
  EXPECT_EQ(DataTypeName(DataType::kFp32), "FP32");
  EXPECT_EQ(DataTypeName(DataType::kBf16), "BF16");
  EXPECT_EQ(DataTypeName(DataType::kBytes), "BYTES");
  EXPECT_EQ(DataTypeName(DataType::kInvalid), "INVALID");
  EXPECT_EQ(DataTypeFromName("INVALID"), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromName("fp32"), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromName("FP31"), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromName(""), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromName("TYPE_FP32"), DataType::kInvalid);
}

TEST(DataTypeTest, ConfigNames) {
  EXPECT_EQ(DataTypeFromConfigName("TYPE_BOOL"), DataType::kBool);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_UINT8"), DataType::kUint8);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_UINT64"), DataType::kUint64);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_INT8"), DataType::kInt8);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_INT32"), DataType::kInt32);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_FP16"), DataType::kFp16);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_FP32"), DataType::kFp32);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_FP64"), DataType::kFp64);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_BF16"), DataType::kBf16);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_STRING"), DataType::kBytes);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_BYTES"), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromConfigName("FP32"), DataType::kInvalid);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_INVALID"), DataType::kInvalid);
}

TEST(DataTypeTest, Sizes) {
  EXPECT_EQ(DataTypeSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kUint8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kUint16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kUint32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kUint64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kFp16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFp32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFp64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
  EXPECT_EQ(DataTypeSize(DataType::kInvalid), 0u);
}

TEST(TensorTest, ElementCount) {
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, 3}), 6);
  EXPECT_EQ(ElementCount({2, 0, 3}), 0);
  EXPECT_EQ(ElementCount({2, -1}), -1);
  EXPECT_EQ(ElementCount({0, -1}), -1);
  EXPECT_EQ(ElementCount({1LL << 32, 1LL << 32}), -1);  // overflows int64
  EXPECT_EQ(ElementCount({1LL << 32, 1LL << 32, 0}), 0);
  EXPECT_EQ(ElementCount({std::numeric_limits<int64_t>::max()}),
            std::numeric_limits<int64_t>::max());
}

TEST(TensorTest, ShapeToString) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({2, 3}), "[2,3]");
  EXPECT_EQ(ShapeToString({-1}), "[-1]");
}

TEST(TensorTest, OwnAndAllocate) {
  Tensor tensor;
  tensor.Own({'a', 'b'});
  EXPECT_EQ(tensor.data, "ab");
  Tensor moved = std::move(tensor);
  EXPECT_EQ(moved.data, "ab");
  EXPECT_EQ(moved.data.data(), moved.storage.data());
  char* bytes = moved.Allocate(3);
  EXPECT_EQ(moved.data, std::string_view("\0\0\0", 3));
  EXPECT_EQ(bytes, moved.data.data());
}

TEST(HalfTest, DoubleToHalf) {
  using internal::DoubleToHalf;
  EXPECT_EQ(DoubleToHalf(0.0), 0x0000);
  EXPECT_EQ(DoubleToHalf(-0.0), 0x8000);
  EXPECT_EQ(DoubleToHalf(1.0), 0x3c00);
  EXPECT_EQ(DoubleToHalf(-2.0), 0xc000);
  EXPECT_EQ(DoubleToHalf(0.1), 0x2e66);
  EXPECT_EQ(DoubleToHalf(65504.0), 0x7bff);
  EXPECT_EQ(DoubleToHalf(65519.99), 0x7bff);
  EXPECT_EQ(DoubleToHalf(65520.0), 0x7c00);  // ties to even: rounds up to infinity
  EXPECT_EQ(DoubleToHalf(1e300), 0x7c00);
  EXPECT_EQ(DoubleToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(DoubleToHalf(std::nan("")) & 0x7c00, 0x7c00);
  EXPECT_NE(DoubleToHalf(std::nan("")) & 0x03ff, 0);
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -14)), 0x0400);          // smallest normal
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -24)), 0x0001);          // smallest subnormal
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25)), 0x0000);          // tie to even: 0
  EXPECT_EQ(DoubleToHalf(std::ldexp(3.0, -25)), 0x0002);          // tie to even: 2
  EXPECT_EQ(DoubleToHalf(std::ldexp(1023.5, -24)), 0x0400);       // subnormal rounds up to normal
  EXPECT_EQ(DoubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3c00);    // tie to even
  EXPECT_EQ(DoubleToHalf(1.0 + std::ldexp(3.0, -11)), 0x3c02);    // tie to even
  EXPECT_EQ(DoubleToHalf(2047.5 / 1024.0 + 1.0 / 4096), 0x4000);  // carries into next binade
  // Straight from double: no double rounding through float.
  EXPECT_EQ(DoubleToHalf(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3c01);
  EXPECT_EQ(DoubleToHalf(1e-300), 0x0000);
}

TEST(HalfTest, HalfToDouble) {
  using internal::HalfToDouble;
  EXPECT_EQ(HalfToDouble(0x3c00), 1.0);
  EXPECT_EQ(HalfToDouble(0xc000), -2.0);
  EXPECT_EQ(HalfToDouble(0x7bff), 65504.0);
  EXPECT_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(HalfToDouble(0x2e66), 0.0999755859375);
  EXPECT_TRUE(std::isinf(HalfToDouble(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToDouble(0x7e00)));
  EXPECT_TRUE(std::signbit(HalfToDouble(0x8000)));
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    double value = internal::HalfToDouble(half);
    if (std::isnan(value)) continue;
    ASSERT_EQ(internal::DoubleToHalf(value), half) << bits;
  }
}

TEST(HalfTest, Bf16) {
  using internal::Bf16ToDouble;
  using internal::DoubleToBf16;
  EXPECT_EQ(DoubleToBf16(1.0), 0x3f80);
  EXPECT_EQ(DoubleToBf16(-2.0), 0xc000);
  EXPECT_EQ(DoubleToBf16(3.140625), 0x4049);
  EXPECT_EQ(DoubleToBf16(1.0 + std::ldexp(1.0, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(DoubleToBf16(1.0 + std::ldexp(3.0, -8)), 0x3f82);  // tie to even
  EXPECT_EQ(DoubleToBf16(1e39), 0x7f80);
  EXPECT_EQ(DoubleToBf16(std::ldexp(1.0, -133)), 0x0001);
  EXPECT_EQ(Bf16ToDouble(0x3f80), 1.0);
  EXPECT_EQ(Bf16ToDouble(0x4049), 3.140625);
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t bf16 = static_cast<uint16_t>(bits);
    double value = Bf16ToDouble(bf16);
    if (std::isnan(value)) continue;
    ASSERT_EQ(DoubleToBf16(value), bf16) << bits;
  }
}

}  // namespace
}  // namespace dais
