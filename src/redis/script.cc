#include "redis/script.h"

#include <openssl/evp.h>

#include <utility>

#include "common/logging.h"

namespace dais::redis {

std::string Sha1Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha1(), nullptr) != 1) {
    DAIS_BUG("EVP_Digest(SHA1) failed");
    return std::string(40, '0');
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

Script::Script(std::string source) : source_(std::move(source)), sha1_(Sha1Hex(source_)) {}

}  // namespace dais::redis
