#include "streams/live_accuracy.h"

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "common/json.h"
#include "streams/redis_feedback.h"

namespace dais::streams {
namespace {

constexpr int kPage = 1000;
constexpr int kPagesPerCall = 20;
constexpr size_t kMaxAnswers = 1000000;
constexpr size_t kMaxWaiting = 100000;

// A field of an XRANGE entry ([id, [field, value, ...]]), or nullptr.
const std::string* FieldOf(const redis::Reply& entry, const char* name) {
  if (entry.elements.size() < 2) return nullptr;
  const auto& kv = entry.elements[1].elements;
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kv[i].str == name) return &kv[i + 1].str;
  }
  return nullptr;
}

// One page of XRANGE from `cursor` (inclusive "ms-0" or exclusive "(id"); advances the cursor.
StatusOr<std::vector<redis::Reply>> Page(redis::Client& c, const std::string& stream,
                                         std::string* cursor) {
  ASSIGN_OR_RETURN(redis::Reply r,
                   c.Run({stream, {"XRANGE", stream, *cursor, "+", "COUNT", std::to_string(kPage)}},
                         std::chrono::milliseconds(2000)));
  if (r.is_error()) return Unavailable("XRANGE " + stream + ": " + r.str);
  if (!r.elements.empty() && !r.elements.back().elements.empty()) {
    *cursor = "(" + r.elements.back().elements[0].str;
  }
  return std::move(r.elements);
}

// The score of a one-row answer: the last value of its first output with 1 or 2 values.
bool ScoreOf(const rapidjson::Value& record, double* score) {
  if (!record.HasMember("outputs") || !record["outputs"].IsArray() || record["outputs"].Empty()) {
    return false;
  }
  const rapidjson::Value& out = record["outputs"][0];
  if (!out.IsObject() || !out.HasMember("data") || !out["data"].IsArray()) return false;
  const auto& data = out["data"];
  if (out.HasMember("shape") && out["shape"].IsArray() && out["shape"].Size() >= 2 &&
      out["shape"][0].IsInt64() && out["shape"][0].GetInt64() != 1) {
    return false;  // several rows: a label judges one request
  }
  if (data.Size() < 1 || data.Size() > 2 || !data[data.Size() - 1].IsNumber()) return false;
  *score = data[data.Size() - 1].GetDouble();
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<LiveAccuracy>> LiveAccuracy::Create(const std::string& feedback_url,
                                                             const std::string& label_url) {
  ASSIGN_OR_RETURN(StreamAddress fb, ParseStreamUrl(feedback_url));
  ASSIGN_OR_RETURN(StreamAddress lb, ParseStreamUrl(label_url));
  ASSIGN_OR_RETURN(auto fbc, ConnectStreamClient(fb, {}, std::chrono::milliseconds(2000)));
  ASSIGN_OR_RETURN(auto lbc, ConnectStreamClient(lb, {}, std::chrono::milliseconds(2000)));
  return std::unique_ptr<LiveAccuracy>(
      new LiveAccuracy(std::move(fbc), fb.stream, std::move(lbc), lb.stream));
}

LiveAccuracy::LiveAccuracy(std::unique_ptr<redis::Client> feedback, std::string feedback_stream,
                           std::unique_ptr<redis::Client> labels, std::string label_stream)
    : feedback_(std::move(feedback)),
      labels_(std::move(labels)),
      feedback_stream_(std::move(feedback_stream)),
      label_stream_(std::move(label_stream)) {}

LiveAccuracy::~LiveAccuracy() = default;

void LiveAccuracy::Judge(Join& j, int64_t version, bool predicted, bool actual) {
  AnswerCounts& c = j.counts[version];
  ++c.labeled;
  if (predicted == actual) ++c.correct;
}

Status LiveAccuracy::ReadFeedback(Join& j, const std::string& model,
                                  const std::set<int64_t>& versions) {
  for (int page = 0; page < kPagesPerCall; ++page) {
    ASSIGN_OR_RETURN(std::vector<redis::Reply> entries,
                     Page(*feedback_, feedback_stream_, &j.feedback_cursor));
    for (const redis::Reply& e : entries) {
      const std::string* text = FieldOf(e, "record");
      rapidjson::Document d;
      if (text == nullptr || !json::ParseJson(*text, &d).ok() || !d.IsObject()) continue;
      auto str = [&d](const char* k) {
        return d.HasMember(k) && d[k].IsString() ? std::string(d[k].GetString()) : "";
      };
      const std::string id = str("id"), version_text = str("version");
      int64_t version = -1;
      try {
        version = std::stoll(version_text);
      } catch (const std::exception&) {
        continue;
      }
      double score = 0;
      if (id.empty() || str("model") != model || !versions.count(version) || !ScoreOf(d, &score)) {
        continue;
      }
      if (auto w = j.waiting.find(id); w != j.waiting.end()) {
        Judge(j, version, score >= 0.5, w->second);
        j.waiting.erase(w);
      } else if (j.answers.size() < kMaxAnswers) {
        j.answers.emplace(id, std::make_pair(version, score >= 0.5));
      }
    }
    if (entries.size() < static_cast<size_t>(kPage)) break;
  }
  return OkStatus();
}

Status LiveAccuracy::ReadLabels(Join& j, const std::string& label) {
  for (int page = 0; page < kPagesPerCall; ++page) {
    ASSIGN_OR_RETURN(std::vector<redis::Reply> entries,
                     Page(*labels_, label_stream_, &j.label_cursor));
    for (const redis::Reply& e : entries) {
      const std::string* id = FieldOf(e, "request_id");
      const std::string* values = FieldOf(e, "labels");
      rapidjson::Document d;
      if (id == nullptr || id->empty() || values == nullptr || !json::ParseJson(*values, &d).ok() ||
          !d.IsObject() || !d.HasMember(label.c_str())) {
        continue;
      }
      const rapidjson::Value& v = d[label.c_str()];
      if (!v.IsNumber() && !v.IsBool()) continue;
      const bool actual = v.IsBool() ? v.GetBool() : v.GetDouble() >= 0.5;
      if (auto a = j.answers.find(*id); a != j.answers.end()) {
        Judge(j, a->second.first, a->second.second, actual);
        j.answers.erase(a);  // its first label counts
      } else if (j.waiting.size() < kMaxWaiting) {
        j.waiting.emplace(*id, actual);
      }
    }
    if (entries.size() < static_cast<size_t>(kPage)) break;
  }
  return OkStatus();
}

StatusOr<std::map<int64_t, AnswerCounts>> LiveAccuracy::Counts(const std::string& model,
                                                               const std::set<int64_t>& versions,
                                                               const std::string& label,
                                                               int64_t since_ms) {
  std::string key = fmt::format("{}\n{}\n{}", model, label, since_ms);
  for (int64_t v : versions) key += "\n" + std::to_string(v);
  auto [it, fresh] = joins_.try_emplace(key);
  Join& j = it->second;
  if (fresh) {
    // Labels may name answers made since the step began: both streams from then on.
    j.feedback_cursor = j.label_cursor = std::to_string(std::max<int64_t>(since_ms, 0)) + "-0";
    if (joins_.size() > 16) {
      auto oldest = joins_.begin();
      for (auto o = joins_.begin(); o != joins_.end(); ++o) {
        if (o->second.used < oldest->second.used) oldest = o;
      }
      if (oldest != it) joins_.erase(oldest);
    }
  }
  j.used = ++calls_;
  RETURN_IF_ERROR(ReadFeedback(j, model, versions));
  RETURN_IF_ERROR(ReadLabels(j, label));
  return j.counts;
}

}  // namespace dais::streams
