#include "cmd/archive.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <thread>

#include "cmd/serve_features.h"
#include "cmd/tls_flags.h"
#include "common/logging.h"
#include "redis/client.h"

namespace dais::cmd {

CLI::App* AddArchiveCommand(CLI::App* app, ArchiveCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "archive",
      "Archive a stream (the feedback stream, txn's event streams) into day-partitioned "
      "<root>/<dataset>/dt=YYYY-MM-DD/part-<consumer>-<seq>.jsonl.gz files, exactly once across "
      "crashes (docs/learning-loop.md)");
  streams::ArchiverOptions& a = o->archiver;
  cmd->add_option("--redis", o->redis, "Redis host:port (a cluster's seeds, comma-separated).")
      ->capture_default_str();
  AddClientTlsFlags(cmd, "redis", "Redis", &o->redis_tls);
  cmd->add_option("--stream", a.stream, "The stream's key (e.g. the STREAM of --feedback-stream).")
      ->required();
  cmd->add_option("--group", a.group, "The consumer group the archivers share.")
      ->capture_default_str();
  cmd->add_option("--consumer", a.consumer,
                  "This archiver's name in the group: keep it across restarts (default: the "
                  "host name).");
  cmd->add_option("--root", a.root, "The offline store's root directory.")->required();
  cmd->add_option("--dataset", a.dataset, "The dataset's directory under --root.")->required();
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
  return cmd;
}

int RunArchive(const ArchiveCliOptions& o) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
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
  auto stream = streams::MakeRedisEventStream(client->get(), 0);
  streams::Archiver archiver(stream.get(), a);
  if (Status s = archiver.Start(); !s.ok()) {
    LOG_ERROR("dais archive: {}", s.message());
    return 2;
  }
  // SIGTERM / SIGINT: the archiver writes what it holds and returns.
  std::thread signals([&archiver, stop] {
    int sig = 0;
    sigwait(&stop, &sig);
    LOG_INFO("dais archive: received {}: writing what is buffered",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    archiver.Stop();
  });
  signals.detach();
  const auto start = std::chrono::steady_clock::now();
  Status s = archiver.Run();
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
