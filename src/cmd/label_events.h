// `dais label-events`: labels fed by events — a consumer of an event stream (`dais txn`'s
// committed orders, a chargeback feed) that turns each event into a label in the label stream
// (streams/event_labels.h, docs/learning-loop.md).
#pragma once

#include <string>

#include "streams/event_labels.h"
#include "tls/config.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct LabelEventsCliOptions {
  std::string redis = "127.0.0.1:6379";  // where the event stream is
  tls::ClientConfig redis_tls;
  std::string label_stream;  // redis://HOST:PORT/STREAM
  streams::EventLabelRule rule;
  streams::EventLabelerOptions labeler;
};

CLI::App* AddLabelEventsCommand(CLI::App* app, LabelEventsCliOptions* options);
// 0: stopped by a signal or drained; 1: the stream could not be read; 2: bad flags.
int RunLabelEvents(const LabelEventsCliOptions& options);

}  // namespace dais::cmd
