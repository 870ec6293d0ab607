// A named, typed, shaped tensor whose bytes are contiguous and row-major.
//
// The bytes either live in the tensor (`storage`) or are borrowed from a buffer that the owner of
// the tensor keeps alive (an InferenceRequest borrows from its HTTP body, so the binary protocol
// copies tensor bytes only once: into the batch). BYTES tensors use Triton's serialized form:
// each element is a 4-byte little-endian length followed by that many bytes.
//
// Tensors are move-only; moving keeps `data` valid (the vector's heap block moves with it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dais/datatype.h"

namespace dais {

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string_view data;
  std::vector<char> storage;

  Tensor() = default;
  Tensor(Tensor&&) = default;
  Tensor& operator=(Tensor&&) = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Takes ownership of `bytes` and points `data` at them.
  void Own(std::vector<char> bytes) {
    storage = std::move(bytes);
    data = std::string_view(storage.data(), storage.size());
  }
  // Allocates `size` zeroed owned bytes and returns a pointer to them.
  char* Allocate(size_t size) {
    storage.assign(size, 0);
    data = std::string_view(storage.data(), storage.size());
    return storage.data();
  }
};

// Product of the dimensions; -1 if any dimension is negative or the product overflows int64;
// 0 if any dimension is 0; 1 for a scalar (empty shape).
int64_t ElementCount(const std::vector<int64_t>& shape);
// "[2,3]"
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace dais
