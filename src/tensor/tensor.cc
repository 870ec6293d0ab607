#include "dais/tensor.h"

#include <limits>

namespace dais {

int64_t ElementCount(const std::vector<int64_t>& shape) {
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
  }
  for (int64_t dim : shape) {
    if (dim == 0) return 0;  // even when the other dimensions would overflow
  }
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (count > std::numeric_limits<int64_t>::max() / dim) return -1;
    count *= dim;
  }
  return count;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

}  // namespace dais
