// libFuzzer target for the W3C traceparent parser (common/trace_context.h): a value either is
// refused or parses into ids that format back into a header the parser accepts again with the
// same fields. Anything else (a crash, a sanitizer report, a round trip that differs) traps.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/trace_context.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  auto t = dais::ParseTraceparent(header);
  if (!t) return 0;
  if (t->trace_id.size() != 32 || t->parent_id.size() != 16) __builtin_trap();
  auto again = dais::ParseTraceparent(t->Header(t->parent_id));
  if (!again || again->trace_id != t->trace_id || again->parent_id != t->parent_id ||
      again->flags != t->flags) {
    __builtin_trap();
  }
  (void)dais::SaneRequestId(header);
  return 0;
}
