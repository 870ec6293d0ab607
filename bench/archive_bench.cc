// Archive benchmark (issue 33): streams::Archiver against the raw XREADGROUP rate of the same
// stream in the same run. Driven by bench/archive_bench.py (which starts redis-server and prints
// the table); results go to docs/benchmarks.md.
//
// Phases, in one invocation, each printing one JSON line on stdout:
//   fill      XADD of --entries feedback-shaped entries (the fields `dais serve
//             --feedback-stream` writes: id, model, version, latency_us, record with a 16-float
//             input and a 2-float output), pipelined by 1000.
//   read      reference: a consumer of its own group reading the whole stream with XREADGROUP
//             COUNT --count (entries parsed into streams::Entry, as the archiver gets them),
//             nothing acknowledged; it stops at the last entry (no empty read).
//   read_ack  reference: the same plus XACK of every batch (the least an at-least-once reader
//             does), in another group.
//   encode    what the archiver does to entries between reading and writing, alone: the
//             entries (read beforehand, untimed) made into JSON lines (ArchiveLine) and
//             gzip-compressed at level 1 as one stream; no Redis, no files.
//   archive   streams::Archiver (drain mode, default flush limits: 50,000 records or 64 MiB
//             per file) in a third group into --dir: JSON lines, gzip, fsync, rename, XACK.
// The archive phase ends as a drain does: with one empty XREADGROUP BLOCK 200 after the last
// entry (and the flush of what is buffered), so about 0.2 s of it is waiting.
// Each phase reports seconds, records/s and this process's CPU seconds (user + system).
//
// Usage: archive_bench --redis 127.0.0.1:P --dir D [--entries N] [--count C]
//                      [--phases fill,read,read_ack,archive] (a later run may skip the fill)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/zlib_codec.h"
#include "redis/client.h"
#include "streams/archiver.h"
#include "streams/event_stream.h"

namespace {

struct Args {
  std::string redis;
  std::string dir;
  int entries = 300000;
  int count = 1000;
  std::string phases = "fill,read,read_ack,encode,archive";
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "archive_bench: %s\n", msg.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) Die("missing value for " + k);
    const std::string v = argv[++i];
    if (k == "--redis") {
      a.redis = v;
    } else if (k == "--dir") {
      a.dir = v;
    } else if (k == "--entries") {
      a.entries = std::stoi(v);
    } else if (k == "--phases") {
      a.phases = v;
    } else if (k == "--count") {
      a.count = std::stoi(v);
    } else {
      Die("unknown flag " + k);
    }
  }
  if (a.redis.empty() || a.dir.empty()) Die("--redis and --dir are required");
  return a;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Runs `body` (which returns the records it handled) and prints the phase's JSON line.
void Phase(const char* name, const std::function<uint64_t()>& body) {
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t records = body();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  std::printf(
      "{\"phase\": \"%s\", \"records\": %llu, \"seconds\": %.4f, \"records_per_s\": %.0f, "
      "\"cpu_s\": %.4f}\n",
      name, static_cast<unsigned long long>(records), secs, static_cast<double>(records) / secs,
      cpu);
  std::fflush(stdout);
}

std::string RecordJson(int i) {
  std::string data;
  for (int k = 0; k < 16; ++k) {
    if (k) data += ",";
    data += std::to_string(((i * 31 + k * 7) % 1000) / 1000.0).substr(0, 5);
  }
  return "{\"time_ms\":" + std::to_string(1764900000000LL + i) + ",\"entity_ids\":{\"user_id\":\"" +
         std::to_string(i % 100000) +
         "\"},\"inputs\":[{\"name\":\"INPUT__0\",\"datatype\":\"FP32\",\"shape\":[1,16],"
         "\"data\":[" +
         data +
         "]}],\"outputs\":[{\"name\":\"OUTPUT__0\",\"datatype\":\"FP32\",\"shape\":[1,2],"
         "\"data\":[0.125,0.875]}]}";
}

uint64_t Fill(dais::redis::Client* client, const std::string& stream, int n) {
  for (int base = 0; base < n; base += 1000) {
    std::vector<dais::redis::KeyedCommand> cmds;
    for (int i = base; i < std::min(n, base + 1000); ++i) {
      cmds.push_back(
          {stream,
           {"XADD", stream, "*", "id", "req-" + std::to_string(i), "model", "fraud", "version", "1",
            "latency_us", std::to_string(100 + i % 900), "record", RecordJson(i)}});
    }
    for (const auto& r : client->RunBatch(std::move(cmds), std::chrono::seconds(10))) {
      if (!r.ok() || r->is_error()) Die("XADD failed");
    }
  }
  return static_cast<uint64_t>(n);
}

uint64_t ReadAll(dais::streams::EventStream* s, const std::string& stream, const std::string& group,
                 int count, bool ack, uint64_t total) {
  if (!s->EnsureGroup(stream, group).ok()) Die("XGROUP CREATE failed");
  uint64_t n = 0;
  while (n < total) {
    auto entries = s->Read(stream, group, "bench", count, /*block_ms=*/1, false);
    if (!entries.ok()) Die("XREADGROUP: " + std::string(entries.status().message()));
    n += entries->size();
    if (ack) {
      std::vector<std::string> ids;
      ids.reserve(entries->size());
      for (const auto& e : *entries) ids.push_back(e.entry_id);
      if (!s->Ack(stream, group, ids).ok()) Die("XACK failed");
    }
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  auto opts = dais::redis::ParseSeeds(args.redis);
  if (!opts.ok()) Die(std::string(opts.status().message()));
  opts->command_timeout = std::chrono::milliseconds(10000);
  auto client = dais::redis::Client::Create(*opts);
  if (!client.ok()) Die(std::string(client.status().message()));
  if (!(*client)->WaitUntilReachable(std::chrono::seconds(5))) Die("redis not reachable");
  auto stream = dais::streams::MakeRedisEventStream(client->get(), 0);
  const std::string key = "bench:feedback";
  const auto want = [&](const std::string& phase) {
    return ("," + args.phases + ",").find("," + phase + ",") != std::string::npos;
  };
  // Every phase reads the stream from its start in a group of its own, made afresh.
  for (const char* group : {"bench-read", "bench-ack", "bench-encode", "bench-archive"}) {
    (void)(*client)->Run({key, {"XGROUP", "DESTROY", key, group}});
  }

  const auto total = static_cast<uint64_t>(args.entries);
  if (want("fill")) {
    (void)(*client)->Run({key, {"DEL", key}});
    Phase("fill", [&] { return Fill(client->get(), key, args.entries); });
  }
  if (want("read"))
    Phase("read",
          [&] { return ReadAll(stream.get(), key, "bench-read", args.count, false, total); });
  if (want("read_ack"))
    Phase("read_ack",
          [&] { return ReadAll(stream.get(), key, "bench-ack", args.count, true, total); });
  if (want("encode")) {
    if (!stream->EnsureGroup(key, "bench-encode").ok()) Die("XGROUP CREATE failed");
    std::vector<dais::streams::Entry> all;
    while (all.size() < total) {
      auto got = stream->Read(key, "bench-encode", "bench", args.count, 1, false);
      if (!got.ok()) Die("XREADGROUP: " + std::string(got.status().message()));
      for (auto& e : *got) all.push_back(std::move(e));
    }
    Phase("encode", [&] {
      dais::Deflater gz(dais::ZlibFormat::kGzip, 1);
      for (const auto& e : all) {
        std::string line = dais::streams::ArchiveLine(key, e);
        line.push_back('\n');
        if (!gz.Feed(line).ok()) Die("deflate failed");
      }
      if (!gz.Finish().ok()) Die("deflate failed");
      return static_cast<uint64_t>(all.size());
    });
  }
  if (!want("archive")) return 0;
  std::filesystem::remove_all(std::filesystem::path(args.dir) / "feedback");
  Phase("archive", [&] {
    dais::streams::ArchiverOptions a;
    a.stream = key;
    a.group = "bench-archive";
    a.consumer = "bench";
    a.root = args.dir;
    a.dataset = "feedback";
    a.read_count = args.count;
    a.drain = true;
    dais::streams::Archiver archiver(stream.get(), a);
    if (auto s = archiver.Start(); !s.ok()) Die("archiver start: " + std::string(s.message()));
    if (auto s = archiver.Run(); !s.ok()) Die("archiver: " + std::string(s.message()));
    if (archiver.stats().records != static_cast<uint64_t>(args.entries)) {
      Die("archived " + std::to_string(archiver.stats().records) + " of " +
          std::to_string(args.entries));
    }
    return archiver.stats().records;
  });
  return 0;
}
