#include "redis/options.h"

#include <charconv>

#include "common/ascii.h"

namespace dais::redis {

Status SplitHostPort(std::string_view address, std::string* host, uint16_t* port) {
  const auto bad = [&](std::string_view why) {
    return InvalidArgument("bad redis address \"" + std::string(address) +
                           "\": " + std::string(why));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return bad("expected host:port");
  std::string_view h = address.substr(0, colon);
  const std::string_view p = address.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) return bad("empty host");
  if (h.find(':') != std::string_view::npos && address.front() != '[') {
    return bad("IPv6 hosts must be written [addr]:port");
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || ec != std::errc() || end != p.data() + p.size() || value == 0 || value > 65535) {
    return bad("port must be 1..65535");
  }
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return OkStatus();
}

StatusOr<ClientOptions> ParseSeeds(std::string_view comma_list) {
  ClientOptions options;
  if (TrimOws(comma_list).empty()) return InvalidArgument("empty redis seed list");
  size_t start = 0;
  for (;;) {
    const size_t comma = comma_list.find(',', start);
    const std::string_view entry = TrimOws(comma_list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (entry.empty()) {
      return InvalidArgument("empty entry in redis seed list \"" + std::string(comma_list) + "\"");
    }
    std::string_view address = entry;
    if (address.starts_with("rediss://")) {
      options.tls.enabled = true;
      address.remove_prefix(9);
    } else if (address.starts_with("redis://")) {
      address.remove_prefix(8);
    }
    while (!address.empty() && address.back() == '/') address.remove_suffix(1);
    std::string host;
    uint16_t port;
    RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
    options.seeds.emplace_back(address);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return options;
}

Status PrepareTls(ClientOptions* o) {
  if (!o->tls.active() || o->tls_context) return OkStatus();
  auto ctx = tls::MakeClientContext(o->tls);
  if (!ctx.ok()) return InvalidArgument("redis TLS: " + std::string(ctx.status().message()));
  o->tls_context = *ctx;
  return OkStatus();
}

Status ValidateOptions(const ClientOptions& o) {
  if (o.seeds.empty()) return InvalidArgument("redis client: no seeds");
  for (const std::string& s : o.seeds) {
    std::string host;
    uint16_t port;
    RETURN_IF_ERROR(SplitHostPort(s, &host, &port));
  }
  if (o.connections_per_node < 1 || o.connections_per_node > 256) {
    return InvalidArgument("redis client: connections_per_node must be 1..256");
  }
  using std::chrono::milliseconds;
  for (auto [name, v] : {std::pair{"connect_timeout", o.connect_timeout},
                         std::pair{"command_timeout", o.command_timeout},
                         std::pair{"slot_refresh_interval", o.slot_refresh_interval},
                         std::pair{"health_check_interval", o.health_check_interval},
                         std::pair{"reconnect_backoff_min", o.reconnect_backoff_min},
                         std::pair{"reconnect_backoff_max", o.reconnect_backoff_max},
                         std::pair{"stuck_connection_timeout", o.stuck_connection_timeout}}) {
    if (v <= milliseconds(0)) {
      return InvalidArgument(std::string("redis client: ") + name + " must be positive");
    }
  }
  if (o.reconnect_backoff_max < o.reconnect_backoff_min) {
    return InvalidArgument("redis client: reconnect_backoff_max < reconnect_backoff_min");
  }
  if (o.max_redirections < 0) return InvalidArgument("redis client: max_redirections < 0");
  if (!o.username.empty() && o.password.empty()) {
    return InvalidArgument("redis client: username without password");
  }
  return OkStatus();
}

}  // namespace dais::redis
