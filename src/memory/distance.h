// Distance kernels for the HNSW index, chosen once at start from what the CPU can do.
//
// hnswlib picks its SIMD code at compile time (`__AVX__` …), and a portable build (no
// -march) gets its 4-wide SSE loops. These kernels are compiled for AVX-512 and AVX2+FMA with
// function target attributes and selected at run time (`__builtin_cpu_supports`), so one binary
// uses the widest unit the machine has and still runs on any x86-64 (or other) CPU.
// docs/benchmarks.md ("Vector memory") has the measured difference.
#pragma once

#include <cstddef>
#include <string_view>

namespace dais::memory {

// hnswlib's DISTFUNC: two vectors and a pointer to their dimension (size_t).
using DistanceFn = float (*)(const void*, const void*, const void*);

struct DistanceKernels {
  DistanceFn inner_product_distance;  // 1 - a·b
  DistanceFn squared_l2;              // |a - b|²
  // The same two over SQ8 codes (below): the int8 dot product scaled back, so about the float
  // distance of the vectors the codes stand for.
  DistanceFn sq8_inner_product_distance;
  DistanceFn sq8_squared_l2;
  std::string_view name;  // "avx512", "avx2-fma" or "portable"
};

// SQ8, scalar quantisation to 8 bits per dimension: a vector as `dimension` int8 codes (its
// components divided by max|x| / 127, rounded), padded to 4 bytes, then the float scale
// (max|x| / 127) and the float |x|² of the original vector. A quarter of the float vector's
// bytes, so a graph search touches a quarter of the cache lines; the index re-ranks its
// candidates by the float vectors (vector_index.cc). The distance functions' parameter is a
// pointer to the dimension (size_t), as for the float kernels.
size_t Sq8Bytes(size_t dimension);
void Sq8Encode(const float* vector, size_t dimension, void* code);

// The widest kernels this CPU runs. DAIS_MEMORY_SIMD=avx2 or =portable caps the choice (for
// benchmarks, and to rule the kernels out when a result looks wrong); =hnswlib gives null
// functions, which VectorIndex takes as "hnswlib's own compiled-in loops" (the baseline these
// kernels are measured against); anything else: the widest.
const DistanceKernels& BestDistanceKernels();
// The kernels of one instruction set, or nullptr when this CPU or build lacks it (tests).
const DistanceKernels* DistanceKernelsFor(std::string_view name);

}  // namespace dais::memory
