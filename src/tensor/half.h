// IEEE binary16 (FP16) and bfloat16 (BF16) <-> double, round-to-nearest-even. Used by the tensor
// codec and by dais perf. Converting straight from double avoids double rounding via float.
#pragma once

#include <cmath>
#include <cstdint>

namespace dais::internal {

// Rounds `value` to a binary format with `mantissa_bits` stored mantissa bits and `exponent_bits`
// exponent bits (sign bit on top). Overflow gives infinity, NaN a quiet NaN.
inline uint16_t DoubleToSmallFloat(double value, int mantissa_bits, int exponent_bits) {
  const uint32_t sign = std::signbit(value) ? 1u << (mantissa_bits + exponent_bits) : 0u;
  const uint32_t exponent_all_ones = (1u << exponent_bits) - 1;
  const uint32_t infinity = exponent_all_ones << mantissa_bits;
  if (std::isnan(value)) return static_cast<uint16_t>(infinity | (1u << (mantissa_bits - 1)));
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<uint16_t>(sign | infinity);
  if (magnitude == 0) return static_cast<uint16_t>(sign);

  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int min_exponent = 1 - bias;
  int frexp_exponent = 0;
  std::frexp(magnitude, &frexp_exponent);                // magnitude = f * 2^e, f in [0.5, 1)
  int exponent = frexp_exponent - 1;                     // floor(log2(magnitude))
  if (exponent < min_exponent) exponent = min_exponent;  // subnormal: fixed quantum
  if (exponent > bias) return static_cast<uint16_t>(sign | infinity);
  // Significand including the implicit bit, as an integer; scaling by a power of two is exact and
  // nearbyint rounds half to even in the default rounding mode.
  uint64_t significand =
      static_cast<uint64_t>(std::nearbyint(std::ldexp(magnitude, mantissa_bits - exponent)));
  if (significand >= (uint64_t{2} << mantissa_bits)) {  // rounding carried into the next binade
    significand >>= 1;
    ++exponent;
  }
  uint32_t biased = 0;  // subnormal (or rounded up to the smallest normal just below)
  if (significand >= (uint64_t{1} << mantissa_bits))
    biased = static_cast<uint32_t>(exponent + bias);
  if (biased >= exponent_all_ones) return static_cast<uint16_t>(sign | infinity);
  const uint32_t mantissa = static_cast<uint32_t>(significand) & ((1u << mantissa_bits) - 1);
  return static_cast<uint16_t>(sign | (biased << mantissa_bits) | mantissa);
}

inline double SmallFloatToDouble(uint16_t bits, int mantissa_bits, int exponent_bits) {
  const bool negative = (bits >> (mantissa_bits + exponent_bits)) & 1u;
  const uint32_t exponent_all_ones = (1u << exponent_bits) - 1;
  const uint32_t biased = (bits >> mantissa_bits) & exponent_all_ones;
  const uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  const int bias = (1 << (exponent_bits - 1)) - 1;
  double magnitude;
  if (biased == exponent_all_ones) {
    magnitude = mantissa != 0 ? std::nan("") : INFINITY;
  } else if (biased == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | (1u << mantissa_bits)),
                           static_cast<int>(biased) - bias - mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

inline uint16_t DoubleToHalf(double value) { return DoubleToSmallFloat(value, 10, 5); }
inline double HalfToDouble(uint16_t bits) { return SmallFloatToDouble(bits, 10, 5); }
inline uint16_t DoubleToBf16(double value) { return DoubleToSmallFloat(value, 7, 8); }
inline double Bf16ToDouble(uint16_t bits) { return SmallFloatToDouble(bits, 7, 8); }

}  // namespace dais::internal
