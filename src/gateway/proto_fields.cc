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

void AppendPackedVarints(std::string* message, int field, const std::vector<int>& values) {
  std::string packed;
  for (int v : values) AppendVarint(&packed, static_cast<uint32_t>(v));
  AppendStringField(message, field, packed);
}

Status ForEachField(std::string_view s, const std::function<void(const WireField&)>& each) {
  size_t pos = 0;
  while (pos < s.size()) {
    uint64_t key = 0;
    if (!ReadVarint(s, &pos, &key) || (key >> 3) == 0 || (key >> 3) > (1u << 29)) {
      return InvalidArgument("not valid protobuf (a bad field tag)");
    }
    WireField f;
    f.field = static_cast<int>(key >> 3);
    f.type = static_cast<int>(key & 7);
    uint64_t n = 0;
    if (f.type == 0) {
      if (!ReadVarint(s, &pos, &f.varint)) return InvalidArgument("not valid protobuf (a varint)");
      each(f);
      continue;
    }
    if (f.type == 1 || f.type == 5) {
      n = f.type == 1 ? 8 : 4;
    } else if (f.type != 2 || !ReadVarint(s, &pos, &n)) {
      return InvalidArgument("not valid protobuf (wire type " + std::to_string(f.type) + ")");
    }
    if (s.size() - pos < n) return InvalidArgument("not valid protobuf (a truncated field)");
    f.bytes = s.substr(pos, n);
    pos += n;
    each(f);
  }
  return OkStatus();
}

}  // namespace dais::gateway
