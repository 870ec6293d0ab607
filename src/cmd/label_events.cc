#include "cmd/label_events.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <thread>

#include "cmd/serve_features.h"
#include "cmd/tls_flags.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "redis/client.h"
#include "streams/redis_labels.h"

namespace dais::cmd {

CLI::App* AddLabelEventsCommand(CLI::App* app, LabelEventsCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "label-events",
      "Turn the events of a stream (dais txn's committed orders, a chargeback feed) into labels "
      "in the label stream, at least once, through a consumer group (docs/learning-loop.md). A "
      "field is an entry field (txn_id) or a member of a JSON field (payload.user_id).");
  cmd->add_option("--redis", o->redis, "Redis host:port of the event stream (a cluster's seeds).")
      ->capture_default_str();
  AddClientTlsFlags(cmd, "redis", "Redis", &o->redis_tls);
  cmd->add_option("--stream", o->labeler.stream, "The event stream's key.")->required();
  cmd->add_option("--group", o->labeler.group, "The consumer group.")->capture_default_str();
  cmd->add_option("--consumer", o->labeler.consumer,
                  "This consumer's name in the group (default: the host name).");
  cmd->add_option("--label-stream", o->label_stream,
                  "redis://HOST:PORT/STREAM: where the labels go (the nodes' --label-stream).")
      ->required();
  cmd->add_option("--label", o->rule.label, "The label's name (purchase, fraud).")->required();
  cmd->add_option("--value", o->rule.value, "Its value for every event.")->capture_default_str();
  cmd->add_option("--value-field", o->rule.value_field,
                  "... or the event field holding it (a number or a boolean).");
  cmd->add_option("--request-id-field", o->rule.request_id_field,
                  "The field naming the judged inference's request id, or");
  cmd->add_option("--entity-field", o->rule.entity_fields,
                  "... the field(s) naming its entity ids (repeat, in order).");
  cmd->add_option("--time-field", o->rule.time_field,
                  "The field with the judged event's time, ms since the epoch (default: the "
                  "time in the stream entry's id).");
  cmd->add_option("--source", o->rule.source, "Who says so (orders, chargebacks).")->required();
  cmd->add_option("--claim-idle-ms", o->labeler.claim_idle_ms,
                  "Take over a dead consumer's entries after this long.")
      ->capture_default_str()
      ->check(CLI::Range(100, 86400000));
  cmd->add_flag("--drain", o->labeler.drain,
                "Exit once nothing new arrives and nothing is pending (a batch run).");
  return cmd;
}

int RunLabelEvents(const LabelEventsCliOptions& o) {
  if (Status s = streams::ValidateRule(o.rule); !s.ok()) {
    fmt::print(stderr, "dais label-events: {}\n", s.message());
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before our threads start: they inherit it
  streams::EventLabelerOptions lo = o.labeler;
  if (lo.consumer.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    lo.consumer = host;
  }
  streams::LabelStreamOptions so;
  so.url = o.label_stream;
  auto sink = streams::RedisLabelStream::Create(so);
  if (!sink.ok()) {
    fmt::print(stderr, "dais label-events: --label-stream: {}\n", sink.status().message());
    return 2;
  }
  FeatureFlags f;
  f.redis = o.redis;
  f.redis_tls = o.redis_tls;
  auto client = ConnectRedis(f);
  if (!client.ok() || !(*client)->WaitUntilReachable(std::chrono::seconds(10))) {
    LOG_ERROR("dais label-events: --redis {}: {}", o.redis,
              client.ok() ? "not reachable" : client.status().message());
    return 2;
  }
  auto events = streams::MakeRedisEventStream(client->get(), 0);
  streams::EventLabeler labeler(events.get(), sink->get(), o.rule, lo);
  LOG_INFO("dais label-events: {} of group {} on {} -> label '{}' in {}", lo.consumer, lo.group,
           lo.stream, o.rule.label, o.label_stream);
  // The main thread waits for the signals (see dais archive: a library's pool thread must not
  // take them); SIGUSR1 is the worker saying it returned by itself.
  const pthread_t main_thread = pthread_self();
  Status s;
  std::thread worker([&] {
    s = labeler.Run();
    pthread_kill(main_thread, SIGUSR1);
  });
  int sig = 0;
  sigwait(&stop, &sig);
  labeler.Stop();
  worker.join();
  const auto& st = labeler.stats();
  LOG_INFO("dais label-events: {} events, {} labels, {} skipped", st.events, st.labels, st.skipped);
  if (!s.ok()) {
    LOG_ERROR("dais label-events: {}", s.message());
    return 1;
  }
  return 0;
}

}  // namespace dais::cmd
