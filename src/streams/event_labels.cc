#include "streams/event_labels.h"

#include <rapidjson/document.h>

#include <chrono>
#include <future>
#include <thread>

#include "common/json.h"
#include "common/logging.h"

namespace dais::streams {
namespace {

// "field" or "field.member" of an entry: its text, or the JSON member (a string, a number or a
// boolean) of a JSON object field. nullopt-like: false when absent.
bool Lookup(const Entry& e, const std::string& path, std::string* text, double* number,
            bool* is_number) {
  const size_t dot = path.find('.');
  const std::string field = path.substr(0, dot);
  bool found = false;
  std::string raw;
  for (const auto& [k, v] : e.fields) {
    if (k == field) {
      raw = v;
      found = true;
    }
  }
  if (!found) return false;
  *is_number = false;
  if (dot == std::string::npos) {
    *text = raw;
    try {
      size_t end = 0;
      *number = std::stod(raw, &end);
      *is_number = end == raw.size();
    } catch (const std::exception&) {
    }
    return true;
  }
  rapidjson::Document d;
  const std::string member = path.substr(dot + 1);
  if (!json::ParseJson(raw, &d).ok() || !d.IsObject() || !d.HasMember(member.c_str())) {
    return false;
  }
  const rapidjson::Value& v = d[member.c_str()];
  if (v.IsString()) {
    *text = v.GetString();
    return true;
  }
  if (v.IsBool()) {
    *number = v.GetBool() ? 1 : 0;
    *text = v.GetBool() ? "1" : "0";
    *is_number = true;
    return true;
  }
  if (v.IsInt64()) {
    *number = static_cast<double>(v.GetInt64());
    *text = std::to_string(v.GetInt64());
    *is_number = true;
    return true;
  }
  if (v.IsNumber()) {
    *number = v.GetDouble();
    *text = std::to_string(v.GetDouble());
    *is_number = true;
    return true;
  }
  return false;
}

Status Missing(const Entry& e, const std::string& path, const char* what) {
  return InvalidArgument("event " + e.entry_id + ": " + path + ": " + what);
}

}  // namespace

Status ValidateRule(const EventLabelRule& r) {
  if (r.label.empty()) return InvalidArgument("--label: the label's name is required");
  if (r.source.empty()) return InvalidArgument("--source: who says so is required");
  if (r.request_id_field.empty() == r.entity_fields.empty()) {
    return InvalidArgument(
        "--request-id-field or --entity-field: one of them names what the label judges");
  }
  return OkStatus();
}

StatusOr<server::Label> LabelOfEvent(const EventLabelRule& r, const Entry& e) {
  server::Label l;
  std::string text;
  double number = 0;
  bool is_number = false;
  if (!r.request_id_field.empty()) {
    if (!Lookup(e, r.request_id_field, &text, &number, &is_number) || text.empty()) {
      return Missing(e, r.request_id_field, "missing");
    }
    l.request_id = text;
  }
  for (const std::string& f : r.entity_fields) {
    if (!Lookup(e, f, &text, &number, &is_number) || text.empty()) return Missing(e, f, "missing");
    l.entity_ids.push_back(text);
  }
  double value = r.value;
  if (!r.value_field.empty()) {
    if (!Lookup(e, r.value_field, &text, &number, &is_number)) {
      return Missing(e, r.value_field, "missing");
    }
    if (!is_number) return Missing(e, r.value_field, "not a number or a boolean");
    value = number;
  }
  l.values = {{r.label, value}};
  if (!r.time_field.empty()) {
    if (!Lookup(e, r.time_field, &text, &number, &is_number)) {
      return Missing(e, r.time_field, "missing");
    }
    if (!is_number || number <= 0) return Missing(e, r.time_field, "not a time in ms");
    l.time_ms = static_cast<int64_t>(number);
  } else {
    try {
      l.time_ms = std::stoll(e.entry_id.substr(0, e.entry_id.find('-')));
    } catch (const std::exception&) {
      return Missing(e, "entry id", "not a stream id");
    }
  }
  l.source = r.source;
  RETURN_IF_ERROR(server::CheckLabel("event " + e.entry_id, l.time_ms, &l));
  return l;
}

EventLabeler::EventLabeler(EventStream* events, server::LabelSink* sink, EventLabelRule rule,
                           EventLabelerOptions options)
    : events_(events), sink_(sink), rule_(std::move(rule)), options_(std::move(options)) {}

bool EventLabeler::Handle(const std::vector<Entry>& entries) {
  std::vector<server::Label> labels;
  std::vector<std::string> ids;
  for (const Entry& e : entries) {
    ids.push_back(e.entry_id);
    ++stats_.events;
    auto l = LabelOfEvent(rule_, e);
    if (!l.ok()) {
      if (stats_.skipped++ < 10) LOG_WARNING("label-events: skipped: {}", l.status().message());
      continue;
    }
    labels.push_back(std::move(*l));
  }
  for (auto pause = std::chrono::milliseconds(200); !labels.empty();
       pause = std::min(pause * 2, std::chrono::milliseconds(5000))) {
    std::promise<Status> stored;
    sink_->Write(labels, [&stored](Status s) { stored.set_value(std::move(s)); });
    const Status s = stored.get_future().get();
    if (s.ok()) {
      stats_.labels += labels.size();
      break;
    }
    LOG_WARNING("label-events: the label stream refused {} labels ({}); again in {} ms",
                labels.size(), s.message(), pause.count());
    for (auto t = std::chrono::milliseconds(0); t < pause; t += std::chrono::milliseconds(100)) {
      if (stop_) return false;  // not acknowledged: labelled again after a restart
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (int tries = 0; !ids.empty(); ++tries) {
    Status s = events_->Ack(options_.stream, options_.group, ids);
    if (s.ok()) break;
    if (stop_ || tries == 50) return false;  // pending: labelled again later (at least once)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

Status EventLabeler::Run() {
  RETURN_IF_ERROR(events_->EnsureGroup(options_.stream, options_.group));
  // What this consumer was given before a restart and did not acknowledge.
  for (bool more = true; more && !stop_;) {
    ASSIGN_OR_RETURN(auto pending, events_->Read(options_.stream, options_.group, options_.consumer,
                                                 options_.batch, 0, true));
    more = !pending.empty() && Handle(pending);
  }
  auto last_claim = std::chrono::steady_clock::now();
  while (!stop_) {
    ASSIGN_OR_RETURN(auto entries, events_->Read(options_.stream, options_.group, options_.consumer,
                                                 options_.batch, 500, false));
    if (!entries.empty() && !Handle(entries)) break;
    if (std::chrono::steady_clock::now() - last_claim >
        std::chrono::milliseconds(options_.claim_idle_ms / 2)) {
      last_claim = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(auto claimed,
                       events_->Claim(options_.stream, options_.group, options_.consumer,
                                      options_.claim_idle_ms, options_.batch));
      if (!claimed.empty() && !Handle(claimed)) break;
      if (!claimed.empty()) continue;
    }
    if (entries.empty() && options_.drain) break;
  }
  return OkStatus();
}

}  // namespace dais::streams
