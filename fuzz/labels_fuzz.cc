// libFuzzer target for the POST /labels body (server/labels.h): ParseLabels either refuses the
// body with InvalidArgument or returns labels that satisfy its rules (something they judge, at
// least one finite value, a source, a time), whose JSON (what the label stream stores) parses
// back. Anything else (a crash, a sanitizer report, another error code) traps.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "server/labels.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto labels = dais::server::ParseLabels(body, 1764900000000);
  if (!labels.ok()) {
    if (labels.status().code() != dais::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (labels->empty() || labels->size() > dais::server::kMaxLabelsPerRequest) __builtin_trap();
  for (const auto& l : *labels) {
    if (l.request_id.empty() && l.entity_ids.empty()) __builtin_trap();
    if (l.values.empty() || l.source.empty() || l.time_ms <= 0) __builtin_trap();
    for (const auto& [name, value] : l.values) {
      if (!std::isfinite(value)) __builtin_trap();
    }
    rapidjson::Document doc;
    if (!dais::json::ParseJson(dais::server::LabelValuesJson(l), &doc).ok() || !doc.IsObject()) {
      __builtin_trap();
    }
    if (!dais::json::ParseJson(dais::server::EntityIdsJson(l), &doc).ok() || !doc.IsArray()) {
      __builtin_trap();
    }
  }
  return 0;
}
