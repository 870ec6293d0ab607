#include "memory/distance.h"

#include <cstdlib>
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
#endif

constexpr DistanceKernels kPortable{PortableIpDistance, PortableL2Distance, "portable"};
#ifdef DAIS_X86
constexpr DistanceKernels kAvx2{Avx2IpDistance, Avx2L2Distance, "avx2-fma"};
constexpr DistanceKernels kAvx512{Avx512IpDistance, Avx512L2Distance, "avx512"};
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
  static constexpr DistanceKernels kHnswlib{nullptr, nullptr, "hnswlib"};
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
  if (name == "avx512" && __builtin_cpu_supports("avx512f")) return &kAvx512;
#endif
  return nullptr;
}

const DistanceKernels& BestDistanceKernels() {
  static const DistanceKernels& chosen = Choose();
  return chosen;
}

}  // namespace dais::memory
