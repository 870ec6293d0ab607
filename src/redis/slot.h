// Redis Cluster key → hash slot mapping (https://redis.io/docs/reference/cluster-spec/).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace dais::redis {

inline constexpr int kSlotCount = 16384;

// CRC16-CCITT (XMODEM: poly 0x1021, init 0, no reflection, no final xor), as Redis Cluster uses.
uint16_t Crc16(std::string_view data);

// The slot of `key` (0..16383), honouring hash tags exactly as Redis does: if the key contains
// '{' and a later '}' with at least one character between the first '{' and the first '}' after
// it, only those characters are hashed; otherwise the whole key is.
uint16_t KeySlot(std::string_view key);

}  // namespace dais::redis
