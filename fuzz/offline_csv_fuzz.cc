// libFuzzer target for the offline feature file parser (src/features/offline_files.h), fed from
// memory. The first input byte picks the format (bit 0: CSV or JSON lines) and a piece size
// (1..128 bytes); the rest is the file. The parser runs twice, on the whole input and piece by
// piece, with a small record limit so that the overlong-record path is reached; the two runs must
// give the same rows and errors, and every row must hold GroupSpec::record_bytes of payload.
// Any crash, sanitizer report or mismatch (trap) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "features/offline/offline_files.h"
#include "features/spec/feature_spec.h"

namespace {

using dais::features::FeatureSpec;
using dais::features::OfflineFormat;
using dais::features::OfflineParser;
using dais::features::OfflineRow;

constexpr const char* kSpec = R"(
entities:
  - {name: user_id, key_type: int64}
feature_groups:
  - name: g
    entity: user_id
    features:
      - {name: a, dtype: FP32, default: 1}
      - {name: b, dtype: INT64, shape: [3], default: [1, 2, 3]}
      - {name: c, dtype: BOOL}
      - {name: d, dtype: INT8, shape: [2, 2]}
)";

const FeatureSpec& Spec() {
  static const dais::features::FeatureSpecPtr spec = [] {
    auto s = dais::features::ParseFeatureSpec(kSpec, "fuzz.yaml");
    if (!s.ok()) __builtin_trap();
    return *s;
  }();
  return *spec;
}

// Rows and errors of one run, as text; "" when the parser failed the whole input.
std::string Run(OfflineFormat format, std::string_view data, size_t piece) {
  const FeatureSpec& spec = Spec();
  const auto& group = spec.groups[0];
  std::string out;
  int64_t rows = 0, errors = 0;
  auto parser = OfflineParser::Create(
      format, "fuzz", spec, group,
      [&](OfflineRow&& row) {
        if (row.payload.size() != group.record_bytes) __builtin_trap();
        out += row.entity_id + '@' + std::to_string(row.event_time_us) + ':' + row.payload + '\n';
        ++rows;
        return true;
      },
      [&](int64_t line, const dais::Status& st) {
        if (line < 1 || st.ok()) __builtin_trap();
        out += st.message() + '\n';
        ++errors;
      },
      /*max_record_bytes=*/256);
  if (!parser.ok()) __builtin_trap();
  dais::Status st;
  for (size_t p = 0; p < data.size() && st.ok(); p += piece)
    st = (*parser)->Feed(data.substr(p, piece));
  if (st.ok()) st = (*parser)->Finish();
  if (!st.ok()) return "failed: " + st.message();
  if ((*parser)->stats().rows != rows || (*parser)->stats().bad_rows != errors) __builtin_trap();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const OfflineFormat format = data[0] & 1 ? OfflineFormat::kJsonLines : OfflineFormat::kCsv;
  const size_t piece = (data[0] >> 1) + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (Run(format, text, text.size() + 1) != Run(format, text, piece)) __builtin_trap();
  if (text.size() < 64) (void)dais::features::ParseTimestampUs(text);
  return 0;
}
