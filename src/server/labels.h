// Labels: outcomes that arrive after the prediction they judge (a chargeback confirms a fraud, an
// order is the purchase of a recommendation shown before it), the learning loop's second part
// (docs/learning-loop.md). A label names what it judges by the request's id (the inference's
// "id", which the feedback stream records), or by entity ids and a time; `dais train` joins them.
//
// The protocol (`POST /labels`, docs/learning-loop.md) is parsed here; a LabelSink ships the
// labels (streams/redis_labels.h: a Redis stream that `dais archive` archives like feedback).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dais/status.h"

namespace dais::server {

struct Label {
  std::string request_id;               // the judged inference's id, or ""
  std::vector<std::string> entity_ids;  // ... or its entities (as the enriched request gave them)
  int64_t time_ms = 0;                  // when the judged thing happened (default: received)
  std::vector<std::pair<std::string, double>> values;  // label name -> value ("label" for one)
  std::string source;                                  // who says so ("chargebacks", "orders")
};

inline constexpr size_t kMaxLabelsPerRequest = 10000;

// The body of POST /labels: one label object, an array of them, or {"labels": [...]}. A label:
//   {"request_id": "r-17" | "entity_ids": ["42", ...], "time_ms": 1764900000000,
//    "label": 1 | "labels": {"fraud": 1, "amount": 12.5}, "source": "chargebacks"}
// (booleans count as 0 / 1). InvalidArgument naming the label and field at fault
// ("labels[3].source: a non-empty string is needed"); no label is taken from a bad body.
// `now_ms` fills a missing time_ms.
StatusOr<std::vector<Label>> ParseLabels(std::string_view body, int64_t now_ms);

// The rules every label meets, whatever the protocol: something it judges (request_id or
// entity_ids), 1 to 64 finite values with non-empty names, a source, ids and names of at most
// 256 bytes, at most 16 entity ids, a positive time (0: `now_ms`, filled in). InvalidArgument
// naming `at` and the field. ParseLabels applies it; the gRPC method too.
Status CheckLabel(const std::string& at, int64_t now_ms, Label* label);

// The JSON of a label's values ({"fraud":1}) and entity ids (["42"]), as the stream stores them.
std::string LabelValuesJson(const Label& label);
std::string EntityIdsJson(const Label& label);

class LabelSink {
 public:
  virtual ~LabelSink() = default;
  // Stores every label or none (an OK means all are stored durably enough to acknowledge);
  // `done` is called exactly once, on any thread.
  virtual void Write(std::vector<Label> labels, std::function<void(Status)> done) = 0;
};

}  // namespace dais::server
