// Lock service benchmark: acquire+release latency and throughput against one Redis.
// Run by bench/lock_bench.py (which starts redis-server and measures redis-benchmark PING beside
// it); prints one JSON line.
//
// usage: lock_bench --redis HOST:PORT [--threads N] [--seconds S] [--same-model]
//   Each thread loops Acquire(MODEL lock of its own model, or of one shared model with
//   --same-model) + Release, timing each pair. Round trips per pair are read from the server's
//   INFO commandstats (EVALSHA + EVAL calls) before and after.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "locks/lock_service.h"

using namespace dais;  // NOLINT: a benchmark tool
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

struct Args {
  std::string redis;
  int threads = 1;
  double seconds = 3;
  bool same_model = false;
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "lock_bench: %s\n", msg.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--same-model") {
      a.same_model = true;
      continue;
    }
    if (i + 1 >= argc) Die("missing value for " + k);
    const std::string v = argv[++i];
    if (k == "--redis") {
      a.redis = v;
    } else if (k == "--threads") {
      a.threads = std::stoi(v);
    } else if (k == "--seconds") {
      a.seconds = std::stod(v);
    } else {
      Die("unknown flag " + k);
    }
  }
  if (a.redis.empty()) Die("--redis is required");
  return a;
}

// EVALSHA + EVAL calls so far, from INFO commandstats.
int64_t ScriptCalls(redis::Client& c) {
  auto r = c.Run({"", {"INFO", "commandstats"}}, milliseconds(2000));
  if (!r.ok()) Die(r.status().ToString());
  int64_t total = 0;
  for (const char* name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const size_t p = r->str.find(name);
    if (p != std::string::npos) total += std::stoll(r->str.substr(p + std::strlen(name)));
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  auto options = redis::ParseSeeds(args.redis);
  if (!options.ok()) Die(options.status().ToString());
  options->connections_per_node = std::max(2, args.threads);
  auto client = redis::Client::Create(*options);
  if (!client.ok()) Die(client.status().ToString());
  if (!(*client)->WaitUntilReachable(milliseconds(5000))) Die("redis not reachable");
  locks::LockServiceOptions lo;
  lo.node_id = "bench";
  auto service = locks::LockService::Create(client->get(), lo);
  if (!service.ok()) Die(service.status().ToString());

  // Warm-up: loads the scripts, opens the connections.
  for (int i = 0; i < 100; ++i) {
    auto l = (*service)->Acquire(locks::LockResource::Model("warmup"), milliseconds(1000));
    if (!l.ok()) Die(l.status().ToString());
    (void)(*l)->Release();
  }

  // Reference: one PING through the same client (its own per-round-trip cost: posting to the I/O
  // thread and waking the caller), 1 thread.
  std::vector<double> ping;
  const auto ping_end = Clock::now() + milliseconds(1000);
  while (Clock::now() < ping_end) {
    const auto t0 = Clock::now();
    if (!(*client)->Run({"", {"PING"}}).ok()) Die("PING failed");
    ping.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(ping.begin(), ping.end());

  const int64_t calls_before = ScriptCalls(**client);
  std::vector<std::vector<double>> latencies(args.threads);
  std::atomic<int> errors{0};
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(args.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] {
      const std::string model = args.same_model ? "bench-shared" : "bench-" + std::to_string(t);
      std::vector<double>& lat = latencies[t];
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        auto lease = (*service)->Acquire(locks::LockResource::Model(model), milliseconds(5000));
        if (!lease.ok() || !(*lease)->Release().ok()) {
          ++errors;
          continue;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t calls = ScriptCalls(**client) - calls_before;

  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf(
      "{\"threads\": %d, \"same_model\": %s, \"ops\": %zu, \"errors\": %d, \"ops_per_s\": %.0f, "
      "\"p50_us\": %.1f, \"p99_us\": %.1f, \"round_trips_per_op\": %.2f, \"client_ping_p50_us\": "
      "%.1f}\n",
      args.threads, args.same_model ? "true" : "false", all.size(), errors.load(),
      all.size() / elapsed, pct(0.50), pct(0.99),
      all.empty() ? 0.0 : static_cast<double>(calls) / all.size(), ping[ping.size() / 2]);
  return 0;
}
