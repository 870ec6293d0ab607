// Base64 (RFC 4648, standard alphabet, padded): the JSON form of bytes (protobuf's JSON mapping,
// the feedback stream's non-numeric tensors).
#pragma once

#include <string>
#include <string_view>

namespace dais {

std::string Base64(std::string_view in);

}  // namespace dais
