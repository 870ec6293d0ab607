// Feature store benchmark: FeatureStore over a real Redis (RedisTier), in process, no HTTP.
// Driven by bench/feature_bench.py, which starts redis-server, runs the redis-benchmark
// references in the same run and prints the table; results go to docs/benchmarks.md.
//
// One phase per invocation; each prints one JSON line on stdout:
//   load      PushSync of --entities records (ids 1..N) in batches of --batch (default 1000).
//   redis1    1 random entity per LookupSync, sequential, --samples lookups; L1 effectively off
//             (StoreOptions::l1_ttl = 0: every lookup reads Redis). p50/p99/p999 in µs.
//   redis100  --rows random entities per LookupSync (one pipelined HMGET batch), --samples.
//   tput      --threads threads, each looping LookupSync of --rows random entities for
//             --seconds (after a 0.3 s warm-up); records/s. L1 off as above.
//   l1        default-like store with a long l1_ttl: warms --hot entities, then times
//             LookupSync of 1 entity that hits L1 (--samples), and the raw L1Cache::Get of the
//             same keys. p50/p99/p999 in ns. tier_reads must stay 0 in the timed part.
// Every lookup's statuses are checked: any row that is not PRESENT is counted in "bad".
// The request objects (entity id strings) are built before the clock starts; the timed part is
// LookupSync itself (key building, L1, single flight, Redis round trip, promise hand-off).
// With --redis-pid, the phase also reports redis-server's CPU seconds over the timed part.
//
// Usage: feature_store_bench --redis 127.0.0.1:P --spec features.yaml --phase P [options]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dais/clock.h"
#include "features/spec/feature_spec.h"
#include "features/store/feature_store.h"
#include "features/store/online_tier.h"
#include "features/store/redis_tier.h"
#include "redis/client.h"
#include "redis/options.h"

namespace {

namespace f = dais::features;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string redis, spec, phase;
  int entities = 100'000;
  int batch = 1000;
  int samples = 0;  // 0: phase default
  int rows = 100;
  int threads = 4;
  double seconds = 2;
  int hot = 10'000;
  int redis_pid = 0;
  int pool = 2;
  std::string tls_ca;  // --redis-tls-ca: Redis over TLS (also rediss:// in --redis)
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "feature_store_bench: %s\n", msg.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) Die("missing value for " + k);
    std::string v = argv[++i];
    if (k == "--redis")
      a.redis = v;
    else if (k == "--spec")
      a.spec = v;
    else if (k == "--phase")
      a.phase = v;
    else if (k == "--entities")
      a.entities = std::stoi(v);
    else if (k == "--batch")
      a.batch = std::stoi(v);
    else if (k == "--samples")
      a.samples = std::stoi(v);
    else if (k == "--rows")
      a.rows = std::stoi(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--hot")
      a.hot = std::stoi(v);
    else if (k == "--redis-pid")
      a.redis_pid = std::stoi(v);
    else if (k == "--pool")
      a.pool = std::stoi(v);
    else if (k == "--redis-tls-ca")
      a.tls_ca = v;
    else
      Die("unknown flag " + k);
  }
  if (a.redis.empty() || a.spec.empty() || a.phase.empty()) {
    Die("usage: feature_store_bench --redis host:port --spec features.yaml "
        "--phase load|redis1|redis100|tput|l1 [--entities N] [--samples N] [--rows N] "
        "[--threads N] [--seconds S] [--hot N] [--redis-pid PID] [--pool N] [--redis-tls-ca FILE]");
  }
  return a;
}

// utime + stime of a process in seconds (0 when unknown).
double ProcCpuSeconds(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = s.rfind(')');
  if (p == std::string::npos) return 0;
  std::vector<std::string> fields;
  size_t i = p + 2;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    fields.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  if (fields.size() < 13) return 0;
  return static_cast<double>(std::stoull(fields[11]) + std::stoull(fields[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

uint64_t Pct(std::vector<uint64_t>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

// Counts the tier reads that reach Redis (to prove the L1 phase never leaves the process).
class CountingTier : public f::OnlineTier {
 public:
  explicit CountingTier(std::unique_ptr<f::OnlineTier> inner) : inner_(std::move(inner)) {}
  void Read(std::vector<f::TierRead> reads, f::Deadline d, f::ReadCallback cb) override {
    reads_ += reads.size();
    inner_->Read(std::move(reads), d, std::move(cb));
  }
  void Write(std::vector<f::TierWrite> w, f::Deadline d, f::WriteCallback cb) override {
    inner_->Write(std::move(w), d, std::move(cb));
  }
  bool Healthy() const override { return inner_->Healthy(); }
  const char* name() const override { return inner_->name(); }
  uint64_t reads() const { return reads_.load(); }

 private:
  std::unique_ptr<f::OnlineTier> inner_;
  std::atomic<uint64_t> reads_{0};
};

struct Bench {
  Args args;
  f::FeatureSpecPtr spec;
  size_t group = 0;
  std::unique_ptr<dais::redis::Client> client;

  f::LookupRequest Request(const std::vector<int>& ids) const {
    f::LookupRequest r;
    r.spec = spec;
    auto& col = r.entities[spec->groups[group].entity];
    col.reserve(ids.size());
    for (int id : ids) col.push_back(std::to_string(id));
    r.groups = {group};
    r.deadline = Clock::now() + std::chrono::seconds(5);  // reset just before use
    return r;
  }

  std::unique_ptr<f::FeatureStore> Store(std::chrono::microseconds l1_ttl, CountingTier** tier) {
    f::StoreOptions o;
    o.l1_ttl = l1_ttl;
    auto t = std::make_unique<CountingTier>(std::make_unique<f::RedisTier>(client.get()));
    *tier = t.get();
    return std::make_unique<f::FeatureStore>(o, std::move(t));
  }
};

size_t Bad(const f::LookupResult& r) {
  size_t n = 0;
  for (auto s : r.statuses) n += s != f::FeatureStatus::kPresent;
  if (r.statuses.empty()) ++n;
  return n;
}

// Payload of entity `id`: age, then 15 click counters (FP32 little-endian, x86).
std::string Payload(const f::GroupSpec& g, int id) {
  std::string p(g.record_bytes, '\0');
  std::vector<float> v(g.record_bytes / sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((id * 31 + i * 7) % 97);
  v[0] = static_cast<float>(18 + id % 60);
  std::memcpy(p.data(), v.data(), std::min(p.size(), v.size() * sizeof(float)));
  return p;
}

void PhaseLoad(Bench& b) {
  CountingTier* tier = nullptr;
  auto store = b.Store(std::chrono::microseconds(0), &tier);
  const f::GroupSpec& g = b.spec->groups[b.group];
  int64_t now = f::UnixNowUs();
  size_t failed = 0, applied = 0;
  auto t0 = Clock::now();
  for (int start = 1; start <= b.args.entities; start += b.args.batch) {
    std::vector<f::PushRow> rows;
    for (int id = start; id < start + b.args.batch && id <= b.args.entities; ++id) {
      rows.push_back(f::PushRow{b.group, std::to_string(id), now, Payload(g, id)});
    }
    for (const auto& r : store->PushSync(b.spec, std::move(rows))) {
      if (!r.ok())
        ++failed;
      else
        applied += *r;
    }
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "{\"phase\":\"load\",\"entities\":%d,\"batch\":%d,\"seconds\":%.3f,"
      "\"rows_per_s\":%.0f,\"applied\":%zu,\"failed\":%zu,\"record_bytes\":%zu}\n",
      b.args.entities, b.args.batch, s, b.args.entities / s, applied, failed, g.record_bytes);
}

void PhaseLatency(Bench& b, int rows, int samples) {
  CountingTier* tier = nullptr;
  auto store = b.Store(std::chrono::microseconds(0), &tier);
  std::mt19937 rng(rows * 7919 + 1);
  std::uniform_int_distribution<int> pick(1, b.args.entities);
  auto make = [&] {
    std::vector<int> ids(static_cast<size_t>(rows));
    for (auto& id : ids) id = pick(rng);
    return b.Request(ids);
  };
  for (int i = 0; i < std::max(200, samples / 20); ++i) store->LookupSync(make());  // warm-up
  std::vector<f::LookupRequest> reqs;
  reqs.reserve(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) reqs.push_back(make());
  std::vector<uint64_t> ns;
  ns.reserve(reqs.size());
  size_t bad = 0;
  uint64_t reads0 = tier->reads();
  double r0 = ProcCpuSeconds(b.args.redis_pid), c0 = SelfCpuSeconds();
  auto w0 = Clock::now();
  for (auto& r : reqs) {
    auto t0 = Clock::now();
    r.deadline = t0 + std::chrono::milliseconds(50);
    f::LookupResult res = store->LookupSync(std::move(r));
    auto t1 = Clock::now();
    ns.push_back(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
    bad += Bad(res);
  }
  double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  double rcpu = ProcCpuSeconds(b.args.redis_pid) - r0, ccpu = SelfCpuSeconds() - c0;
  std::printf(
      "{\"phase\":\"%s\",\"rows\":%d,\"samples\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,"
      "\"p999_us\":%.1f,\"max_us\":%.1f,\"lookups_per_s\":%.0f,\"records_per_s\":%.0f,"
      "\"tier_reads\":%llu,\"bad\":%zu,\"redis_cores\":%.2f,\"bench_cores\":%.2f}\n",
      rows == 1 ? "redis1" : "redis100", rows, samples, Pct(ns, 0.50) / 1e3, Pct(ns, 0.99) / 1e3,
      Pct(ns, 0.999) / 1e3, Pct(ns, 1.0) / 1e3, samples / wall, samples * rows / wall,
      static_cast<unsigned long long>(tier->reads() - reads0), bad, rcpu / wall, ccpu / wall);
}

void PhaseThroughput(Bench& b) {
  CountingTier* tier = nullptr;
  auto store = b.Store(std::chrono::microseconds(0), &tier);
  const int rows = b.args.rows;
  std::atomic<bool> measuring{false}, stop{false};
  std::vector<uint64_t> counts(static_cast<size_t>(b.args.threads), 0);
  std::vector<size_t> bads(static_cast<size_t>(b.args.threads), 0);
  std::vector<std::vector<uint64_t>> lat(static_cast<size_t>(b.args.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < b.args.threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t * 104729 + 17));
      std::uniform_int_distribution<int> pick(1, b.args.entities);
      std::vector<int> ids(static_cast<size_t>(rows));
      while (!stop.load(std::memory_order_relaxed)) {
        for (auto& id : ids) id = pick(rng);
        f::LookupRequest r = b.Request(ids);
        auto t0 = Clock::now();
        r.deadline = t0 + std::chrono::milliseconds(50);
        f::LookupResult res = store->LookupSync(std::move(r));
        auto t1 = Clock::now();
        if (measuring.load(std::memory_order_relaxed)) {
          counts[static_cast<size_t>(t)] += static_cast<uint64_t>(rows);
          bads[static_cast<size_t>(t)] += Bad(res);
          lat[static_cast<size_t>(t)].push_back(
              static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double r0 = ProcCpuSeconds(b.args.redis_pid), c0 = SelfCpuSeconds();
  auto w0 = Clock::now();
  measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(b.args.seconds));
  measuring = false;
  double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  double rcpu = ProcCpuSeconds(b.args.redis_pid) - r0, ccpu = SelfCpuSeconds() - c0;
  stop = true;
  for (auto& t : threads) t.join();
  uint64_t total = 0;
  size_t bad = 0;
  std::vector<uint64_t> all;
  for (size_t t = 0; t < counts.size(); ++t) {
    total += counts[t];
    bad += bads[t];
    all.insert(all.end(), lat[t].begin(), lat[t].end());
  }
  std::printf(
      "{\"phase\":\"tput\",\"threads\":%d,\"rows\":%d,\"seconds\":%.2f,"
      "\"records_per_s\":%.0f,\"lookups\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,"
      "\"bad\":%zu,\"redis_cores\":%.2f,\"bench_cores\":%.2f}\n",
      b.args.threads, rows, wall, total / wall, all.size(), Pct(all, 0.5) / 1e3,
      Pct(all, 0.99) / 1e3, bad, rcpu / wall, ccpu / wall);
}

void PhaseL1(Bench& b, int samples) {
  CountingTier* tier = nullptr;
  // l1_ttl long enough that nothing needs a refresh during the phase.
  auto store = b.Store(std::chrono::minutes(10), &tier);
  const int hot = std::min(b.args.hot, b.args.entities);
  for (int start = 1; start <= hot; start += 100) {  // warm: 100 entities per lookup
    std::vector<int> ids;
    for (int id = start; id < start + 100 && id <= hot; ++id) ids.push_back(id);
    size_t bad = Bad(store->LookupSync(b.Request(ids)));
    if (bad) Die("warm-up lookup returned non-PRESENT rows");
  }
  std::mt19937 rng(4242);
  std::uniform_int_distribution<int> pick(1, hot);
  std::vector<f::LookupRequest> reqs;
  std::vector<std::string> keys;
  reqs.reserve(static_cast<size_t>(samples));
  keys.reserve(static_cast<size_t>(samples));
  const f::GroupSpec& g = b.spec->groups[b.group];
  for (int i = 0; i < samples; ++i) {
    int id = pick(rng);
    reqs.push_back(b.Request({id}));
    keys.push_back(f::RecordKey(*b.spec, g, std::to_string(id)));
  }
  // A short untimed pass to settle the caches and branch predictors.
  for (int i = 0; i < std::min(samples, 2000); ++i) store->LookupSync(b.Request({pick(rng)}));
  uint64_t reads0 = tier->reads();
  std::vector<uint64_t> ns;
  ns.reserve(reqs.size());
  size_t bad = 0;
  auto w0 = Clock::now();
  for (auto& r : reqs) {
    auto t0 = Clock::now();
    f::LookupResult res = store->LookupSync(std::move(r));
    auto t1 = Clock::now();
    ns.push_back(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
    bad += Bad(res);
  }
  double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  uint64_t tier_reads = tier->reads() - reads0;
  // Raw L1Cache::Get on the same keys (the cache alone: no request, no key formatting).
  std::vector<uint64_t> raw;
  raw.reserve(keys.size());
  size_t misses = 0;
  for (const auto& k : keys) {
    uint64_t now = dais::NowNs();
    auto t0 = Clock::now();
    f::RecordPtr rec = store->l1().Get(k, now);
    auto t1 = Clock::now();
    raw.push_back(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
    misses += rec == nullptr;
  }
  // The clock's own cost, to read the numbers above against.
  std::vector<uint64_t> empty;
  empty.reserve(10000);
  for (int i = 0; i < 10000; ++i) {
    auto t0 = Clock::now();
    auto t1 = Clock::now();
    empty.push_back(static_cast<uint64_t>(std::chrono::nanoseconds(t1 - t0).count()));
  }
  std::printf(
      "{\"phase\":\"l1\",\"hot\":%d,\"samples\":%d,\"p50_ns\":%llu,\"p99_ns\":%llu,"
      "\"p999_ns\":%llu,\"max_ns\":%llu,\"lookups_per_s\":%.0f,\"tier_reads\":%llu,"
      "\"bad\":%zu,\"raw_get_p50_ns\":%llu,\"raw_get_p99_ns\":%llu,"
      "\"raw_get_p999_ns\":%llu,\"raw_get_misses\":%zu,\"clock_p50_ns\":%llu}\n",
      hot, samples, static_cast<unsigned long long>(Pct(ns, 0.5)),
      static_cast<unsigned long long>(Pct(ns, 0.99)),
      static_cast<unsigned long long>(Pct(ns, 0.999)),
      static_cast<unsigned long long>(Pct(ns, 1.0)), samples / wall,
      static_cast<unsigned long long>(tier_reads), bad,
      static_cast<unsigned long long>(Pct(raw, 0.5)),
      static_cast<unsigned long long>(Pct(raw, 0.99)),
      static_cast<unsigned long long>(Pct(raw, 0.999)), misses,
      static_cast<unsigned long long>(Pct(empty, 0.5)));
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  b.args = Parse(argc, argv);
  auto spec = f::LoadFeatureSpecFile(b.args.spec);
  if (!spec.ok()) Die(std::string(spec.status().message()));
  b.spec = *spec;
  if (b.spec->groups.empty()) Die("the spec has no feature groups");
  auto opts = dais::redis::ParseSeeds(b.args.redis);
  if (!opts.ok()) Die(std::string(opts.status().message()));
  opts->connections_per_node = b.args.pool;
  opts->tls.ca_file = b.args.tls_ca;
  opts->command_timeout = std::chrono::milliseconds(5000);
  auto client = dais::redis::Client::Create(*opts);
  if (!client.ok()) Die(std::string(client.status().message()));
  b.client = std::move(*client);
  if (!b.client->WaitUntilReachable(std::chrono::seconds(5))) Die("redis not reachable");

  const std::string& p = b.args.phase;
  if (p == "load")
    PhaseLoad(b);
  else if (p == "redis1")
    PhaseLatency(b, 1, b.args.samples ? b.args.samples : 20000);
  else if (p == "redis100")
    PhaseLatency(b, b.args.rows, b.args.samples ? b.args.samples : 2000);
  else if (p == "tput")
    PhaseThroughput(b);
  else if (p == "l1")
    PhaseL1(b, b.args.samples ? b.args.samples : 200000);
  else
    Die("unknown phase " + p);
  std::fflush(stdout);
  return 0;
}
