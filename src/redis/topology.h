// Redis Cluster topology: the slot → master map and the parsing of CLUSTER SLOTS and of MOVED /
// ASK redirections. Pure data; the Client owns one SlotMap and replaces it on refresh.
// Thread-safety: none (the Client uses it on its I/O thread only).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "redis/resp.h"
#include "redis/slot.h"

namespace dais::redis {

// 16384 entries of master index into `masters` (-1: slot not served).
struct SlotMap {
  std::vector<std::string> masters;  // "host:port", unique
  std::array<int16_t, kSlotCount> owner;

  SlotMap() { owner.fill(-1); }
  // The master serving `slot`, or nullptr.
  const std::string* Owner(uint16_t slot) const {
    const int16_t i = owner[slot];
    return i < 0 ? nullptr : &masters[static_cast<size_t>(i)];
  }
  // Points `slot` at `address`, adding it to `masters` if new (for MOVED).
  void Assign(uint16_t slot, const std::string& address);
  size_t covered() const;
};

// Parses a CLUSTER SLOTS reply ([[start, end, [host, port, id, ...], replicas...], ...]). An
// empty host (the node does not know its own address) is replaced by `queried_host`, the host the
// reply came from. InvalidArgument for a malformed reply.
StatusOr<SlotMap> ParseClusterSlots(const Reply& reply, std::string_view queried_host);

struct Redirect {
  enum class Type { kMoved, kAsk };
  Type type;
  uint16_t slot;
  std::string address;  // "host:port"
};

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" (the text of an error reply), else
// nullopt. An empty host (":6381", Redis 7 with an unknown endpoint) is replaced by
// `current_host`.
std::optional<Redirect> ParseRedirect(std::string_view error, std::string_view current_host);

}  // namespace dais::redis
