// Just enough of the protobuf wire format to route a KServe v2 gRPC call without decoding it:
// the top-level string fields 1 and 2 that ModelInferRequest (model_name, model_version) and the
// model requests (ModelMetadataRequest, ModelReadyRequest, ModelConfigRequest,
// ModelStatisticsRequest: name, version) share, and appending a string field. Protobuf parsers
// keep the last value of a singular field, so appending model_name / model_version rewrites
// them without copying the tensors in front of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::gateway {

struct ModelRef {
  std::string name;     // field 1 (empty when absent)
  std::string version;  // field 2
};

// Scans the message's top-level fields. InvalidArgument when it is not valid wire format, or
// when field 1 or 2 is not length-delimited.
StatusOr<ModelRef> ReadModelRef(std::string_view message);

// Appends field `field` (wire type 2) with `value` to `message`.
void AppendStringField(std::string* message, int field, std::string_view value);
// Appends `values` as the packed repeated varint field `field` (a repeated uint32).
void AppendPackedVarints(std::string* message, int field, const std::vector<int>& values);

// One top-level field of a message: `bytes` is a length-delimited field's content, or the 4 / 8
// bytes of a fixed32 / fixed64 one; `varint` a varint's value.
struct WireField {
  int field = 0;
  int type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  std::string_view bytes;
  uint64_t varint = 0;
};
// Calls `each` for every top-level field, in order; InvalidArgument when the message is not valid
// wire format.
Status ForEachField(std::string_view message, const std::function<void(const WireField&)>& each);

}  // namespace dais::gateway
