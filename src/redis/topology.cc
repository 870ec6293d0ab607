#include "redis/topology.h"

#include <charconv>

#include "redis/options.h"

namespace dais::redis {
namespace {

std::string JoinHostPort(std::string_view host, int64_t port) {
  if (host.find(':') != std::string_view::npos) {
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

void SlotMap::Assign(uint16_t slot, const std::string& address) {
  for (size_t i = 0; i < masters.size(); ++i) {
    if (masters[i] == address) {
      owner[slot] = static_cast<int16_t>(i);
      return;
    }
  }
  masters.push_back(address);
  owner[slot] = static_cast<int16_t>(masters.size() - 1);
}

size_t SlotMap::covered() const {
  size_t n = 0;
  for (int16_t o : owner) n += o >= 0;
  return n;
}

StatusOr<SlotMap> ParseClusterSlots(const Reply& reply, std::string_view queried_host) {
  const auto bad = [](std::string why) {
    return InvalidArgument("malformed CLUSTER SLOTS reply: " + std::move(why));
  };
  if (reply.type != Reply::Type::kArray) return bad("not an array");
  SlotMap map;
  for (const Reply& range : reply.elements) {
    if (range.type != Reply::Type::kArray || range.elements.size() < 3) {
      return bad("range is not [start, end, master, ...]");
    }
    const Reply& start = range.elements[0];
    const Reply& end = range.elements[1];
    const Reply& master = range.elements[2];
    if (start.type != Reply::Type::kInteger || end.type != Reply::Type::kInteger ||
        start.integer < 0 || end.integer >= kSlotCount || start.integer > end.integer) {
      return bad("bad slot range");
    }
    if (master.type != Reply::Type::kArray || master.elements.size() < 2 ||
        master.elements[0].type != Reply::Type::kBulk ||
        master.elements[1].type != Reply::Type::kInteger || master.elements[1].integer <= 0 ||
        master.elements[1].integer > 65535) {
      return bad("bad master entry");
    }
    std::string_view host = master.elements[0].str;
    if (host.empty() || host == "?") host = queried_host;
    const std::string address = JoinHostPort(host, master.elements[1].integer);
    for (int64_t s = start.integer; s <= end.integer; ++s) {
      map.Assign(static_cast<uint16_t>(s), address);
    }
  }
  return map;
}

std::optional<Redirect> ParseRedirect(std::string_view error, std::string_view current_host) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    r.type = Redirect::Type::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.type = Redirect::Type::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  auto [end, ec] = std::from_chars(error.data(), error.data() + space, slot);
  if (ec != std::errc() || end != error.data() + space || slot >= kSlotCount) return std::nullopt;
  r.slot = static_cast<uint16_t>(slot);
  std::string_view address = error.substr(space + 1);
  if (address.starts_with(":")) {
    r.address = std::string(current_host) + std::string(address);
  } else {
    r.address = std::string(address);
  }
  std::string host;
  uint16_t port;
  if (!SplitHostPort(r.address, &host, &port).ok()) return std::nullopt;
  return r;
}

}  // namespace dais::redis
