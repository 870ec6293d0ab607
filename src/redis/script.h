// A Lua script for EVAL/EVALSHA, with its SHA1 computed once.
// Thread-safety: immutable after construction; share freely (e.g. as a static).
#pragma once

#include <string>

namespace dais::redis {

class Script {
 public:
  explicit Script(std::string source);
  const std::string& source() const { return source_; }
  // 40 lowercase hex digits, as SCRIPT LOAD returns.
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

// Lowercase hex SHA1 of `data`.
std::string Sha1Hex(const std::string& data);

}  // namespace dais::redis
