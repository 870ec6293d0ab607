// Labels fed by events (docs/learning-loop.md, "Labels from events"): a consumer of an event
// stream — `dais txn`'s committed orders, a chargeback feed — that turns each event into a label
// and appends it to the label stream, so outcomes known to the business's own systems reach the
// join without a client posting them. `dais label-events` runs it.
//
// A rule names where each part of the label comes from: an entry field ("txn_id") or a member of
// a JSON field ("payload.user_id"). The label judges the request id it names or the entity ids
// it lists; its value is a constant or a field (a number or a boolean); its time is a field
// (milliseconds) or, by default, the time in the stream entry's id (when the event was
// appended). Delivery is at least once: the entries are acknowledged (XACK) only after their
// labels were stored; after a crash some are labelled again (the join takes the last received
// label, so a repeated one changes nothing). An event a rule cannot read (a named field missing
// or of the wrong type) is acknowledged without a label and counted as skipped, with the reason
// logged.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "dais/status.h"
#include "server/labels.h"
#include "streams/event_stream.h"

namespace dais::streams {

struct EventLabelRule {
  std::string label;                       // the label's name ("purchase", "fraud")
  double value = 1;                        // its value, unless value_field is given
  std::string value_field;                 // "payload.amount": the value from the event
  std::string request_id_field;            // the judged inference's id, or
  std::vector<std::string> entity_fields;  // ... its entities (in order)
  std::string time_field;                  // ms since the epoch; empty: the entry id's time
  std::string source;                      // who says so ("orders", "chargebacks")
};

// InvalidArgument naming the flag: a label name, a source, and request_id_field or
// entity_fields are required.
Status ValidateRule(const EventLabelRule& rule);

// The label of one stream entry; InvalidArgument naming the field when the entry lacks what the
// rule reads (then it makes no label).
StatusOr<server::Label> LabelOfEvent(const EventLabelRule& rule, const Entry& entry);

struct EventLabelerOptions {
  std::string stream;  // the event stream's key
  std::string group = "labels";
  std::string consumer;
  int batch = 500;
  int claim_idle_ms = 30000;
  bool drain = false;  // return once nothing new arrives and nothing is pending
};

struct EventLabelerStats {
  uint64_t events = 0, labels = 0, skipped = 0;
};

// The consumer loop: reads (its own pending entries first, then new ones, and claims those a
// dead consumer left), writes each batch's labels with `sink`, acknowledges, and again; a batch
// the sink refuses is retried (not acknowledged) after a pause.
class EventLabeler {
 public:
  EventLabeler(EventStream* events, server::LabelSink* sink, EventLabelRule rule,
               EventLabelerOptions options);
  // Until Stop or, with drain, until nothing is left; an error when the stream cannot be read.
  Status Run();
  void Stop() { stop_ = true; }
  const EventLabelerStats& stats() const { return stats_; }

 private:
  // Labels and acknowledges `entries`; false when stopping.
  bool Handle(const std::vector<Entry>& entries);

  EventStream* events_;
  server::LabelSink* sink_;
  const EventLabelRule rule_;
  const EventLabelerOptions options_;
  std::atomic<bool> stop_{false};
  EventLabelerStats stats_;
};

}  // namespace dais::streams
