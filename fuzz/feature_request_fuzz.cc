// libFuzzer target for the feature store's input parsers: features.yaml (ParseFeatureSpec), and
// the Feast API bodies (/get-online-features and /push) against an in-process store holding a
// few records. The first input byte picks the parser. Every answer must come back exactly once,
// with 200, 400 or 404 and a JSON body; anything else (a crash, a sanitizer report, a 5xx, no
// answer) traps.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "features/spec/feature_spec.h"
#include "features/store/memory_tier.h"
#include "frontends/http/feast_http.h"
#include "frontends/http/http_status.h"

namespace {

using namespace dais::features;
using dais::frontends::http::FeastHttp;

constexpr const char* kSpec = R"(
domain: shop
entities:
  - {name: user_id, key_type: int64}
  - {name: device, key_type: string}
feature_groups:
  - name: user_profile
    entity: user_id
    max_age: 1h
    features:
      - {name: age, dtype: FP32, default: 30}
      - {name: clicks, dtype: INT64, shape: [3], default: [1, 2, 3]}
      - {name: vip, dtype: BOOL}
  - name: device_stats
    entity: device
    features:
      - {name: score, dtype: FP64}
)";

struct World {
  FeatureSpecPtr spec;
  std::unique_ptr<FeatureStore> store;
  std::unique_ptr<FeastHttp> api;
  World() {
    auto s = ParseFeatureSpec(kSpec, "fuzz.yaml");
    if (!s.ok()) __builtin_trap();
    spec = *s;
    StoreOptions o;
    o.access_capacity = 1000;
    store = std::make_unique<FeatureStore>(o, std::make_unique<MemoryTier>(1 << 20));
    std::string payload(4 + 24 + 1, '\0');
    std::vector<PushRow> rows = {{0, "1", UnixNowUs(), payload}, {0, "2", 1, payload}};
    store->PushSync(spec, rows);
    FeatureSpecPtr sp = spec;
    api = std::make_unique<FeastHttp>(
        store.get(), [sp] { return std::vector<FeatureSpecPtr>{sp}; },
        [sp](const std::string& name) { return name == "m" ? sp : FeatureSpecPtr(); });
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto spec = ParseFeatureSpec(body, "fuzz.yaml");
      if (!spec.ok() && spec.status().code() != dais::StatusCode::kInvalidArgument) {
        __builtin_trap();
      }
      break;
    }
    case 1:
    case 2: {
      int answers = 0, status = 0;
      auto done = [&](dais::StatusOr<std::string> json) {
        ++answers;
        status = json.ok() ? 200 : dais::frontends::http::HttpStatusFor(json.status().code());
        if (json.ok() && (json->empty() || (*json)[0] != '{')) __builtin_trap();
      };
      if (data[0] % 3 == 1) {
        world.api->GetOnlineFeatures(body, done);
      } else {
        world.api->Push(body, done);
      }
      if (answers != 1) __builtin_trap();
      if (status != 200 && status != 400 && status != 404 && status != 503) __builtin_trap();
      break;
    }
  }
  return 0;
}
