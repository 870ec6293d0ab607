#include "cmd/archive.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <thread>

#include "cmd/metrics_port.h"
#include "cmd/serve_features.h"
#include "cmd/tls_flags.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "metrics/registry.h"
#include "redis/client.h"

namespace dais::cmd {

CLI::App* AddArchiveCommand(CLI::App* app, ArchiveCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "archive",
      "Archive a stream (the feedback stream, txn's event streams) into day-partitioned "
      "<root>/<dataset>/dt=YYYY-MM-DD/part-<consumer>-<seq>.jsonl.gz files, exactly once across "
      "crashes (docs/learning-loop.md). 'compact' merges small parts.");
  streams::ArchiverOptions& a = o->archiver;
  cmd->add_option("--redis", o->redis, "Redis host:port (a cluster's seeds, comma-separated).")
      ->capture_default_str();
  AddClientTlsFlags(cmd, "redis", "Redis", &o->redis_tls);
  cmd->add_option("--stream", a.stream,
                  "The stream's key (e.g. the STREAM of --feedback-stream). Required.");
  cmd->add_option("--group", a.group, "The consumer group the archivers share.")
      ->capture_default_str();
  cmd->add_option("--consumer", a.consumer,
                  "This archiver's name in the group: keep it across restarts (default: the "
                  "host name).");
  cmd->add_option("--root", a.root, "The offline store's root directory. Required.");
  cmd->add_option("--dataset", a.dataset, "The dataset's directory under --root. Required.");
  cmd->add_option("--max-records", a.max_records, "A part is written at this many entries.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-bytes", a.max_bytes, "... or at this many bytes of JSON lines.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-age-ms", a.max_age_ms, "... or when its oldest entry waited this long.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--claim-idle-ms", a.claim_idle_ms,
                  "Entries another archiver left unacknowledged this long are taken over.")
      ->capture_default_str()
      ->check(CLI::Range(100, 86400000));
  cmd->add_flag("--drain", a.drain,
                "Exit once nothing new arrives, nothing is pending for this consumer and no "
                "entry is claimable (a batch run).");
  cmd->add_option("--metrics-port", o->metrics_port,
                  "Port of GET /metrics (dais_archive_*: records, bytes, files, lag in entries "
                  "and seconds); 0 picks a free one, logged as 'ports: metrics=N'. Default (-1): "
                  "none.");
  cmd->add_option("--metrics-address", o->metrics_address, "Address the metrics port binds.")
      ->capture_default_str();

  CLI::App* compact = cmd->add_subcommand(
      "compact",
      "Merge a dataset's small parts, day by day, into compacted-*.jsonl.gz files of about "
      "--target-bytes (each archiver's newest part stays: its restart reads it). Safe to run "
      "beside the archivers and to kill: the next run finishes or undoes an interrupted one.");
  compact->add_option("--root", o->compact.root, "The offline store's root directory.")->required();
  compact->add_option("--dataset", o->compact.dataset, "The dataset's directory under --root.")
      ->required();
  compact
      ->add_option("--target-bytes", o->compact.target_bytes,
                   "Size (compressed) of a compacted file.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  compact
      ->add_option("--min-files", o->compact.min_files,
                   "Leave a day alone when it has fewer compactable files than this.")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000000));
  return cmd;
}

namespace {

int RunCompact(const streams::CompactOptions& c) {
  const auto start = std::chrono::steady_clock::now();
  auto stats = streams::CompactArchive(c);
  if (!stats.ok()) {
    fmt::print(stderr, "dais archive compact: {}\n", stats.status().message());
    return 1;
  }
  fmt::print(
      "{} days compacted: {} files -> {} ({} -> {} bytes); {} interrupted compactions "
      "recovered; {:.1f} s\n",
      stats->days, stats->files_before, stats->files_after, stats->bytes_before, stats->bytes_after,
      stats->recovered,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

// dais_archive_lag_entries from XINFO GROUPS (the group's "lag": entries not yet delivered to
// any of its consumers), every second until `stop`.
void PollLag(redis::Client* client, const streams::ArchiverOptions& a, std::atomic<bool>* stop) {
  metrics::Gauge& lag = metrics::Registry::Global()
                            .AddGauge("dais_archive_lag_entries",
                                      "Entries of the stream not yet delivered to the archive's "
                                      "group (XINFO GROUPS lag).",
                                      {"stream", "dataset"})
                            .Get({a.stream, a.dataset});
  while (!stop->load()) {
    auto r = client->Run({a.stream, {"XINFO", "GROUPS", a.stream}}, std::chrono::seconds(2));
    if (r.ok() && r->type == redis::Reply::Type::kArray) {
      for (const redis::Reply& g : r->elements) {
        std::string name;
        int64_t value = -1;
        for (size_t i = 0; i + 1 < g.elements.size(); i += 2) {
          if (g.elements[i].str == "name") name = g.elements[i + 1].str;
          if (g.elements[i].str == "lag" &&
              g.elements[i + 1].type == redis::Reply::Type::kInteger) {
            value = g.elements[i + 1].integer;
          }
        }
        if (name == a.group && value >= 0) lag.Set(static_cast<double>(value));
      }
    }
    for (int i = 0; i < 10 && !stop->load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace

int RunArchive(const ArchiveCliOptions& o, CLI::App* cmd) {
  if (cmd->get_subcommand("compact")->parsed()) return RunCompact(o.compact);
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"--stream", &o.archiver.stream},
        {"--root", &o.archiver.root},
        {"--dataset", &o.archiver.dataset}}) {
    if (value->empty()) {
      fmt::print(stderr, "dais archive: {} is required (or the subcommand compact)\n", flag);
      return 2;
    }
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before any thread of ours starts: they inherit it
  streams::ArchiverOptions a = o.archiver;
  if (a.consumer.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    a.consumer = host;
  }
  FeatureFlags f;
  f.redis = o.redis;
  f.redis_tls = o.redis_tls;
  auto client = ConnectRedis(f);
  if (!client.ok() || !(*client)->WaitUntilReachable(std::chrono::seconds(10))) {
    LOG_ERROR("dais archive: --redis {}: {}", o.redis,
              client.ok() ? "not reachable" : client.status().message());
    return 2;
  }
  std::unique_ptr<frontends::http::Server> metrics_server;
  if (o.metrics_port >= 0) {
    metrics_server = MetricsServer(o.metrics_address, o.metrics_port);
    if (Status s = metrics_server->Start(); !s.ok()) {
      LOG_ERROR("dais archive: --metrics-port: {}", s.message());
      return 2;
    }
    LOG_INFO("ports: metrics={}", metrics_server->port());
  }
  auto stream = streams::MakeRedisEventStream(client->get(), 0);
  streams::Archiver archiver(stream.get(), a);
  if (Status s = archiver.Start(); !s.ok()) {
    LOG_ERROR("dais archive: {}", s.message());
    return 2;
  }
  std::atomic<bool> stop_polling{false};
  std::thread lag_poller;
  if (metrics_server) {
    lag_poller = std::thread(PollLag, client->get(), std::cref(a), &stop_polling);
  }
  // The archiver runs on its own thread and this (the main) thread waits for the signals: a
  // process-directed signal goes to the main thread when it waits for it, and otherwise to any
  // thread that does not block it, such as a pool a library started before main() (OpenBLAS
  // does), whose default action would kill the process with the buffer unwritten. SIGUSR1 is the
  // archiver thread saying it returned by itself (--drain, or an error).
  sigaddset(&stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  const pthread_t main_thread = pthread_self();
  const auto start = std::chrono::steady_clock::now();
  Status s;
  std::thread worker([&] {
    s = archiver.Run();
    pthread_kill(main_thread, SIGUSR1);
  });
  int sig = 0;
  sigwait(&stop, &sig);
  if (sig != SIGUSR1) {
    LOG_INFO("dais archive: received {}: writing what is buffered",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    archiver.Stop();
  }
  worker.join();
  stop_polling = true;
  if (lag_poller.joinable()) lag_poller.join();
  if (metrics_server) metrics_server->Stop();
  const auto& st = archiver.stats();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG_INFO("dais archive: {} records in {} files ({} bytes), {} already archived, {:.1f} s",
           st.records, st.files, st.bytes, st.duplicates, secs);
  if (!s.ok()) {
    LOG_ERROR("dais archive: {}", s.message());
    return 1;
  }
  return 0;
}

}  // namespace dais::cmd
