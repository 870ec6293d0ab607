#include "memory/memory_store.h"

#include <charconv>
#include <cstring>

namespace dais::memory {

std::string EncodeStored(const Point& point, int64_t expires_ms) {
  std::string out = std::to_string(expires_ms) + ":";
  const size_t at = out.size();
  out.resize(at + point.vector.size() * sizeof(float));
  std::memcpy(out.data() + at, point.vector.data(), point.vector.size() * sizeof(float));
  out += PayloadJson(point.payload);
  return out;
}

StatusOr<StoredPoint> DecodeStored(std::string_view id, std::string_view value, uint64_t seq,
                                   const CollectionSpec& spec) {
  StoredPoint p;
  p.point.id = std::string(id);
  p.seq = seq;
  const size_t colon = value.find(':');
  const auto bad = [&](const std::string& what) {
    return Status(StatusCode::kDataLoss,
                  "stored point " + std::string(id) + " of collection " + spec.name + ": " + what);
  };
  if (colon == std::string_view::npos ||
      std::from_chars(value.data(), value.data() + colon, p.expires_ms).ec != std::errc()) {
    return bad("no expiry");
  }
  value.remove_prefix(colon + 1);
  const size_t bytes = static_cast<size_t>(spec.dimension) * sizeof(float);
  if (value.size() < bytes) return bad("shorter than its vector");
  p.point.vector.resize(spec.dimension);
  std::memcpy(p.point.vector.data(), value.data(), bytes);
  value.remove_prefix(bytes);
  auto payload = ParsePayloadJson(value, spec);
  if (!payload.ok()) return bad(payload.status().message());
  p.point.payload = std::move(*payload);
  return p;
}

}  // namespace dais::memory
