#include "memory/distance.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DAIS_X86 1
// GCC 12's _mm512_reduce_add_ps passes an _mm256_undefined_pd() placeholder that its own
// -Wuninitialized then reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dais::memory {
namespace {

size_t Dim(const void* param) { return *static_cast<const size_t*>(param); }

float PortableDot(const float* a, const float* b, size_t n) {
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float PortableL2(const float* a, const float* b, size_t n) {
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const float d = a[i] - b[i];
    sum += d * d;
  }
  return sum;
}

float PortableIpDistance(const void* a, const void* b, const void* param) {
  return 1.0f - PortableDot(static_cast<const float*>(a), static_cast<const float*>(b), Dim(param));
}

float PortableL2Distance(const void* a, const void* b, const void* param) {
  return PortableL2(static_cast<const float*>(a), static_cast<const float*>(b), Dim(param));
}

// SQ8 (distance.h): the scale and |x|² follow the codes.
size_t Sq8Tail(size_t n) { return (n + 3) & ~size_t{3}; }
float Sq8Scale(const void* code, size_t n) {
  float f;
  std::memcpy(&f, static_cast<const char*>(code) + Sq8Tail(n), sizeof f);
  return f;
}
float Sq8Norm(const void* code, size_t n) {
  float f;
  std::memcpy(&f, static_cast<const char*>(code) + Sq8Tail(n) + sizeof(float), sizeof f);
  return f;
}

int32_t PortableInt8Dot(const int8_t* a, const int8_t* b, size_t n) {
  int32_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += int32_t{a[i]} * int32_t{b[i]};
  return sum;
}

// One SQ8 distance pair per instruction set, over its int8 dot product.
#define DAIS_SQ8_DISTANCES(PREFIX, TARGET, DOT)                                                   \
  TARGET float PREFIX##Sq8IpDistance(const void* a, const void* b, const void* param) {           \
    const size_t n = Dim(param);                                                                  \
    const float dot =                                                                             \
        static_cast<float>(DOT(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), n)); \
    return 1.0f - dot * Sq8Scale(a, n) * Sq8Scale(b, n);                                          \
  }                                                                                               \
  TARGET float PREFIX##Sq8L2Distance(const void* a, const void* b, const void* param) {           \
    const size_t n = Dim(param);                                                                  \
    const float dot =                                                                             \
        static_cast<float>(DOT(static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), n)); \
    return std::max(0.0f,                                                                         \
                    Sq8Norm(a, n) + Sq8Norm(b, n) - 2 * dot * Sq8Scale(a, n) * Sq8Scale(b, n));   \
  }

DAIS_SQ8_DISTANCES(Portable, , PortableInt8Dot)

#ifdef DAIS_X86
// Two accumulators hide the FMA latency; the tail (dimension not a multiple of 16) is scalar.
__attribute__((target("avx2,fma"))) float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

__attribute__((target("avx2,fma"))) float Avx2IpDistance(const void* pa, const void* pb,
                                                         const void* param) {
  const float* a = static_cast<const float*>(pa);
  const float* b = static_cast<const float*>(pb);
  const size_t n = Dim(param);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  return 1.0f - (HorizontalSum(_mm256_add_ps(s0, s1)) + PortableDot(a + i, b + i, n - i));
}

__attribute__((target("avx2,fma"))) float Avx2L2Distance(const void* pa, const void* pb,
                                                         const void* param) {
  const float* a = static_cast<const float*>(pa);
  const float* b = static_cast<const float*>(pb);
  const size_t n = Dim(param);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    s0 = _mm256_fmadd_ps(d, d, s0);
  }
  return HorizontalSum(_mm256_add_ps(s0, s1)) + PortableL2(a + i, b + i, n - i);
}

// 16 floats a step; the tail is one masked load, so every dimension stays in vector registers.
__attribute__((target("avx512f"))) float Avx512IpDistance(const void* pa, const void* pb,
                                                          const void* param) {
  const float* a = static_cast<const float*>(pa);
  const float* b = static_cast<const float*>(pb);
  const size_t n = Dim(param);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16)
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  return 1.0f - _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f"))) float Avx512L2Distance(const void* pa, const void* pb,
                                                          const void* param) {
  const float* a = static_cast<const float*>(pa);
  const float* b = static_cast<const float*>(pb);
  const size_t n = Dim(param);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
    s0 = _mm512_fmadd_ps(d0, d0, s0);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    s0 = _mm512_fmadd_ps(d, d, s0);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 d =
        _mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i));
    s1 = _mm512_fmadd_ps(d, d, s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// int8 x int8: widened to int16, multiplied and summed in pairs into int32 (madd), 16 codes a
// step (AVX2) or 32 (AVX-512 BW); |products| <= 127², so pairs cannot overflow.
__attribute__((target("avx2,fma"))) int32_t Avx2Int8Dot(const int8_t* a, const int8_t* b,
                                                        size_t n) {
  __m256i s = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i y =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(x, y));
  }
  const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  const __m128i q = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  const __m128i r = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
  return _mm_cvtsi128_si32(r) + PortableInt8Dot(a + i, b + i, n - i);
}

__attribute__((target("avx512f,avx512bw"))) int32_t Avx512Int8Dot(const int8_t* a, const int8_t* b,
                                                                  size_t n) {
  __m512i s = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i x =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    const __m512i y =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    s = _mm512_add_epi32(s, _mm512_madd_epi16(x, y));
  }
  return _mm512_reduce_add_epi32(s) + PortableInt8Dot(a + i, b + i, n - i);
}

DAIS_SQ8_DISTANCES(Avx2, __attribute__((target("avx2,fma"))), Avx2Int8Dot)
DAIS_SQ8_DISTANCES(Avx512, __attribute__((target("avx512f,avx512bw"))), Avx512Int8Dot)
#endif

constexpr DistanceKernels kPortable{PortableIpDistance, PortableL2Distance, PortableSq8IpDistance,
                                    PortableSq8L2Distance, "portable"};
#ifdef DAIS_X86
constexpr DistanceKernels kAvx2{Avx2IpDistance, Avx2L2Distance, Avx2Sq8IpDistance,
                                Avx2Sq8L2Distance, "avx2-fma"};
constexpr DistanceKernels kAvx512{Avx512IpDistance, Avx512L2Distance, Avx512Sq8IpDistance,
                                  Avx512Sq8L2Distance, "avx512"};
#endif

const DistanceKernels& Widest(size_t from) {
  constexpr std::string_view kOrder[] = {"avx512", "avx2-fma", "portable"};
  for (size_t i = from; i < std::size(kOrder); ++i) {
    if (const DistanceKernels* k = DistanceKernelsFor(kOrder[i])) return *k;
  }
  return kPortable;
}

const DistanceKernels& Choose() {
  const char* asked = std::getenv("DAIS_MEMORY_SIMD");
  const std::string_view a = asked == nullptr ? "" : asked;
  static constexpr DistanceKernels kHnswlib{nullptr, nullptr, nullptr, nullptr, "hnswlib"};
  if (a == "hnswlib") return kHnswlib;
  if (a.starts_with("avx2")) return Widest(1);  // avx2, else portable
  if (a == "portable") return Widest(2);
  return Widest(0);
}

}  // namespace

const DistanceKernels* DistanceKernelsFor(std::string_view name) {
  if (name == "portable") return &kPortable;
#ifdef DAIS_X86
  __builtin_cpu_init();
  if (name == "avx2-fma" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return &kAvx2;
  }
  if (name == "avx512" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    return &kAvx512;
  }
#endif
  return nullptr;
}

size_t Sq8Bytes(size_t dimension) { return Sq8Tail(dimension) + 2 * sizeof(float); }

void Sq8Encode(const float* v, size_t n, void* code) {
  float max_abs = 0;
  double norm = 0;  // |x|² of a float vector can pass float's range
  for (size_t i = 0; i < n; ++i) {
    max_abs = std::max(max_abs, std::fabs(v[i]));
    norm += static_cast<double>(v[i]) * v[i];
  }
  const float scale = max_abs / 127.0f;
  auto* out = static_cast<int8_t*>(code);
  for (size_t i = 0; i < n; ++i) {
    // v / max_abs first: 127 / max_abs overflows for a tiny max_abs (subnormal scale).
    const long q = max_abs > 0 ? std::lrint(v[i] / max_abs * 127.0f) : 0;
    out[i] = static_cast<int8_t>(std::clamp(q, -127L, 127L));
  }
  const float stored_norm = static_cast<float>(std::min<double>(norm, FLT_MAX));
  std::memset(out + n, 0, Sq8Tail(n) - n);
  std::memcpy(out + Sq8Tail(n), &scale, sizeof scale);
  std::memcpy(out + Sq8Tail(n) + sizeof(float), &stored_norm, sizeof stored_norm);
}

const DistanceKernels& BestDistanceKernels() {
  static const DistanceKernels& chosen = Choose();
  return chosen;
}

}  // namespace dais::memory
