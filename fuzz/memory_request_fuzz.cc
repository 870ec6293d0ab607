// libFuzzer target for the vector memory API's bodies (memory/point.h, memory/collection_spec.h).
// The first byte picks the parser: a collection spec, an upsert, a search, ids (4), or the query
// string's `shards` list (the gateway's fan-out). Each either
// refuses with InvalidArgument or returns what its rules promise: vectors of the collection's
// dimension with finite coordinates (unit length for cosine), payloads in the schema that
// round-trip through their stored JSON, k in range, a spec whose JSON parses back to itself.
// Anything else (a crash, a sanitizer report, another code) traps.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memory/collection_spec.h"
#include "memory/point.h"

namespace m = dais::memory;

namespace {

void CheckVector(const m::CollectionSpec& spec, const std::vector<float>& v) {
  if (static_cast<int>(v.size()) != spec.dimension) __builtin_trap();
  double norm = 0;
  for (float x : v) {
    if (!std::isfinite(x)) __builtin_trap();
    norm += static_cast<double>(x) * x;
  }
  if (spec.metric == m::Metric::kCosine && std::fabs(norm - 1.0) > 1e-3) __builtin_trap();
}

void Refused(const dais::Status& s) {
  if (s.code() != dais::StatusCode::kInvalidArgument) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const m::CollectionSpecPtr spec = *m::ParseCollectionSpec(
      R"({"name": "f", "dimension": 4, "metric": "cosine",
          "payload": {"s": "string", "n": "number", "b": "bool"}})");
  switch (data[0] % 5) {
    case 0: {
      auto parsed = m::ParseCollectionSpec(body);
      if (!parsed.ok()) return Refused(parsed.status()), 0;
      auto again = m::ParseCollectionSpec(m::CollectionSpecJson(**parsed));
      if (!again.ok() || m::CollectionSpecJson(**again) != m::CollectionSpecJson(**parsed)) {
        __builtin_trap();
      }
      break;
    }
    case 1: {
      auto points = m::ParseUpsert(body, *spec);
      if (!points.ok()) return Refused(points.status()), 0;
      if (points->empty() || points->size() > m::kMaxBatch) __builtin_trap();
      for (const auto& p : *points) {
        if (p.id.empty() || p.id.size() > m::kMaxIdBytes) __builtin_trap();
        CheckVector(*spec, p.vector);
        auto payload = m::ParsePayloadJson(m::PayloadJson(p.payload), *spec);
        if (!payload.ok() || m::PayloadJson(*payload) != m::PayloadJson(p.payload)) {
          __builtin_trap();
        }
      }
      break;
    }
    case 2: {
      auto r = m::ParseSearch(body, *spec);
      if (!r.ok()) return Refused(r.status()), 0;
      if (r->k < 1 || r->k > m::kMaxK) __builtin_trap();
      CheckVector(*spec, r->vector);
      for (const auto& c : r->filter) {
        if (!spec->payload.count(c.field)) __builtin_trap();
      }
      break;
    }
    case 3: {
      auto shards = m::ParseShardsParam(body, 8);
      if (!shards.ok()) return Refused(shards.status()), 0;
      for (int s : *shards) {
        if (s < 0 || s >= 8) __builtin_trap();
      }
      break;
    }
    default: {
      bool with_vector = false;
      auto ids = m::ParseIds(body, &with_vector);
      if (!ids.ok()) return Refused(ids.status()), 0;
      if (ids->empty() || ids->size() > m::kMaxBatch) __builtin_trap();
      break;
    }
  }
  return 0;
}
