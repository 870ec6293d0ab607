#include "cmd/stream.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "common/logging.h"
#include "redis/client.h"

namespace dais::cmd {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One entry's line: its id, then the `record` field as is (the feedback stream's JSON), else
// the fields as a JSON object of strings.
std::string Line(const redis::Reply& entry) {
  const std::string& id = entry.elements[0].str;
  const auto& fields = entry.elements[1].elements;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].str == "record") return id + " " + fields[i + 1].str;
  }
  std::string obj = "{";
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (i > 0) obj += ",";
    obj += JsonString(fields[i].str) + ":" + JsonString(fields[i + 1].str);
  }
  return id + " " + obj + "}";
}

}  // namespace

CLI::App* AddStreamCommand(CLI::App* app, StreamCliOptions* o) {
  CLI::App* cmd = app->add_subcommand("stream", "Read dais's event streams (docs/streams.md)");
  cmd->require_subcommand(1);
  CLI::App* tail = cmd->add_subcommand(
      "tail",
      "Print a Redis stream's entries as they arrive, one line each: the entry id, then "
      "the record (the feedback stream's JSON) or the fields as JSON");
  tail->add_option("stream", o->stream, "The stream's key (e.g. the STREAM of --feedback-stream).")
      ->required();
  tail->add_option("--redis", o->redis, "Redis host:port.")->capture_default_str();
  tail->add_option("--from", o->from,
                   "'$': only entries added from now on; '0': from the first; or an entry id.")
      ->capture_default_str();
  tail->add_option("--count", o->count, "Stop after this many entries (0: never).")
      ->check(CLI::NonNegativeNumber);
  tail->add_option("--timeout-secs", o->timeout_secs, "Stop after this long (0: never).")
      ->check(CLI::NonNegativeNumber);
  return cmd;
}

int RunStream(CLI::App*, const StreamCliOptions& o) {
  auto seeds = redis::ParseSeeds(o.redis);
  if (!seeds.ok()) {
    std::fprintf(stderr, "dais stream tail: --redis: %s\n", seeds.status().message().c_str());
    return 2;
  }
  auto client = redis::Client::Create(*seeds);
  if (!client.ok() || !(*client)->WaitUntilReachable(std::chrono::seconds(5))) {
    std::fprintf(stderr, "dais stream tail: Redis %s is not reachable\n", o.redis.c_str());
    return 1;
  }
  std::string last = o.from;
  int printed = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(o.timeout_secs);
  while (o.count == 0 || printed < o.count) {
    if (o.timeout_secs > 0 && std::chrono::steady_clock::now() - start >= limit) break;
    auto r = (*client)->Run(
        {o.stream, {"XREAD", "COUNT", "100", "BLOCK", "500", "STREAMS", o.stream, last}},
        std::chrono::milliseconds(2000));
    if (!r.ok() || r->is_error()) {
      std::fprintf(stderr, "dais stream tail: XREAD %s: %s\n", o.stream.c_str(),
                   r.ok() ? r->str.c_str() : r.status().message().c_str());
      return 1;
    }
    if (r->is_nil() || r->elements.empty()) continue;  // nothing new within the block time
    for (const redis::Reply& entry : r->elements[0].elements[1].elements) {
      std::printf("%s\n", Line(entry).c_str());
      last = entry.elements[0].str;
      if (++printed == o.count) break;
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace dais::cmd
