// libFuzzer target for the L1 invalidation message decoder (features/store/invalidation.h):
// payloads arrive from Redis pub/sub, where any client of that Redis can publish. Checks, besides
// crashes and sanitizer reports: every key decoded lies inside the payload; a payload that decodes
// without error re-encodes to the same bytes; a damaged one still yields a prefix of keys whose
// encoding is a prefix of the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "features/store/invalidation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> keys;
  const bool ok = dais::features::DecodeInvalidation(payload, &keys).ok();
  for (std::string_view k : keys) {
    if (k.data() < payload.data() || k.data() + k.size() > payload.data() + payload.size()) {
      std::abort();
    }
  }
  const std::string again = dais::features::EncodeInvalidation(keys);
  if (ok && again != payload) std::abort();
  if (!ok && (again.size() >= payload.size() || payload.substr(0, again.size()) != again)) {
    std::abort();
  }
  return 0;
}
