#include "gateway/proto_fields.h"

namespace dais::gateway {
namespace {

bool ReadVarint(std::string_view s, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(s[(*pos)++]);
    *value |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80u) == 0) return true;
  }
  return false;
}

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

StatusOr<ModelRef> ReadModelRef(std::string_view s) {
  ModelRef ref;
  size_t pos = 0;
  while (pos < s.size()) {
    uint64_t key = 0;
    if (!ReadVarint(s, &pos, &key)) {
      return InvalidArgument("the request message is not valid protobuf (a truncated field tag)");
    }
    const uint64_t field = key >> 3;
    const unsigned type = key & 7;
    if (field == 0) return InvalidArgument("the request message is not valid protobuf (field 0)");
    if ((field == 1 || field == 2) && type != 2) {
      return InvalidArgument("the request message's field " + std::to_string(field) +
                             " (the model's name or version) is not a string");
    }
    uint64_t n = 0;
    switch (type) {
      case 0:
        if (!ReadVarint(s, &pos, &n)) {
          return InvalidArgument("the request message is not valid protobuf (a truncated varint)");
        }
        break;
      case 1:
      case 5:
        n = type == 1 ? 8 : 4;
        if (s.size() - pos < n) {
          return InvalidArgument("the request message is not valid protobuf (a truncated field)");
        }
        pos += n;
        break;
      case 2:
        if (!ReadVarint(s, &pos, &n) || s.size() - pos < n) {
          return InvalidArgument(
              "the request message is not valid protobuf (a truncated length-delimited field)");
        }
        if (field == 1) ref.name = std::string(s.substr(pos, n));
        if (field == 2) ref.version = std::string(s.substr(pos, n));
        pos += n;
        break;
      default:
        return InvalidArgument("the request message is not valid protobuf (wire type " +
                               std::to_string(type) + ")");
    }
  }
  return ref;
}

void AppendStringField(std::string* message, int field, std::string_view value) {
  AppendVarint(message, (static_cast<uint64_t>(field) << 3) | 2);
  AppendVarint(message, value.size());
  message->append(value);
}

}  // namespace dais::gateway
