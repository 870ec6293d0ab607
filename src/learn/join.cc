#include "learn/join.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "common/json.h"

namespace dais::learn {
namespace {

namespace fs = std::filesystem;

struct Prediction {
  std::string id;
  std::string entities;  // entity ids joined by '\x1f'
  int64_t time_ms = 0;
  std::vector<float> features;
};

struct LabelRow {
  std::string request_id;
  std::string entities;
  int64_t time_ms = 0;
  int64_t received_ms = 0;
  double value = 0;
  bool used = false;
};

// Every data file of a dataset, by day then name.
std::vector<fs::path> DataFiles(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& day : fs::directory_iterator(dir, ec)) {
    if (!day.is_directory() || day.path().filename().string().rfind("dt=", 0) != 0) continue;
    for (const auto& f : fs::directory_iterator(day.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (name.empty() || name[0] == '.' || name[0] == '_') continue;
      if (name.size() > 9 && name.compare(name.size() - 9, 9, ".jsonl.gz") == 0) {
        out.push_back(f.path());
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Calls `line` for each line of a gzip file (several members read as one stream).
Status ForEachLine(const fs::path& path,
                   const std::function<Status(std::string_view, size_t)>& line) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr && errno == ENOENT) {
    return NotFound("vanished: " + path.string());  // listed, then removed (a compaction)
  }
  if (f == nullptr) return Internal("cannot open " + path.string());
  gzbuffer(f, 1 << 17);
  std::string pending;
  std::vector<char> buf(1 << 17);
  size_t number = 0;
  Status result;
  for (;;) {
    const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      result = InvalidArgument(path.string() + ": corrupt gzip: " + gzerror(f, &err));
      break;
    }
    if (n == 0) break;
    pending.append(buf.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      result = line(std::string_view(pending).substr(start, nl - start), ++number);
      if (!result.ok()) break;
    }
    if (!result.ok()) break;
    pending.erase(0, start);
  }
  if (result.ok() && !pending.empty()) result = line(pending, ++number);
  gzclose(f);
  return result;
}

std::string Entities(const rapidjson::Value* v) {
  std::string out;
  if (v == nullptr || !v->IsArray()) return out;
  for (const auto& e : v->GetArray()) {
    if (!e.IsString()) continue;
    if (!out.empty()) out.push_back('\x1f');
    out.append(e.GetString(), e.GetStringLength());
  }
  return out;
}

const rapidjson::Value* Member(const rapidjson::Value& o, const char* name) {
  if (!o.IsObject()) return nullptr;
  auto it = o.FindMember(name);
  return it == o.MemberEnd() ? nullptr : &it->value;
}

// A stream field archived as a string ("1764900000000") or a number.
int64_t Int(const rapidjson::Value* v) {
  if (v == nullptr) return 0;
  if (v->IsInt64()) return v->GetInt64();
  if (v->IsString()) {
    int64_t n = 0;
    const char* s = v->GetString();
    for (; *s >= '0' && *s <= '9'; ++s) n = n * 10 + (*s - '0');
    return n;
  }
  return 0;
}

// One feedback line -> a usable prediction of the spec's model,, or false (`*other_model`: another
// model's).
bool ReadPrediction(const rapidjson::Value& line, const TrainingSpec& spec, Prediction* p,
                    int* width, bool* other_model) {
  const rapidjson::Value* record = Member(line, "record");
  const rapidjson::Value* model = record ? Member(*record, "model") : nullptr;
  *other_model = model == nullptr || !model->IsString() || spec.model != model->GetString();
  if (*other_model) return false;
  const rapidjson::Value* id = Member(*record, "id");
  p->id = id && id->IsString() ? id->GetString() : "";
  p->entities = Entities(Member(*record, "entity_ids"));
  p->time_ms = Int(Member(*record, "time_ms"));
  const rapidjson::Value* inputs = Member(*record, "inputs");
  if (inputs == nullptr || !inputs->IsArray()) return false;
  for (const auto& in : inputs->GetArray()) {
    const rapidjson::Value* name = Member(in, "name");
    if (name == nullptr || !name->IsString() || spec.input != name->GetString()) continue;
    const rapidjson::Value* shape = Member(in, "shape");
    const rapidjson::Value* data = Member(in, "data");
    if (shape == nullptr || !shape->IsArray() || data == nullptr || !data->IsArray()) return false;
    // One row: shape [F] or [1, F].
    if (shape->Size() == 2 && !((*shape)[0].IsInt64() && (*shape)[0].GetInt64() == 1)) return false;
    if (shape->Size() != 1 && shape->Size() != 2) return false;
    p->features.clear();
    for (const auto& v : data->GetArray()) {
      if (!v.IsNumber()) return false;
      p->features.push_back(static_cast<float>(v.GetDouble()));
    }
    if (p->features.empty() || (*width != 0 && *width != static_cast<int>(p->features.size()))) {
      return false;
    }
    *width = static_cast<int>(p->features.size());
    return true;
  }
  return false;
}

// True the first time a line's stream entry is seen: a compaction's sources and target both
// listed (between its rename and its removals) hold the same entries.
bool FirstSeen(const rapidjson::Document& doc, std::unordered_set<std::string>* seen) {
  const rapidjson::Value* id = Member(doc, "entry_id");
  if (id == nullptr || !id->IsString()) return true;
  const rapidjson::Value* stream = Member(doc, "stream");
  std::string key = stream && stream->IsString() ? stream->GetString() : "";
  key += '\n';
  key += id->GetString();
  return seen->insert(std::move(key)).second;
}

Status ReadLabels(const TrainingSpec& spec, int64_t cutoff_ms, JoinStats* stats,
                  std::vector<LabelRow>* rows) {
  std::unordered_set<std::string> seen;
  for (const fs::path& file : DataFiles(spec.labels)) {
    ++stats->files;
    RETURN_IF_ERROR(ForEachLine(file, [&](std::string_view text, size_t n) -> Status {
      rapidjson::Document doc;
      if (Status s = json::ParseJson(text, &doc); !s.ok()) {
        return InvalidArgument(file.string() + ":" + std::to_string(n) + ": " +
                               std::string(s.message()));
      }
      if (!FirstSeen(doc, &seen)) {
        ++stats->duplicates;
        return OkStatus();
      }
      const rapidjson::Value* values = Member(doc, "labels");
      const rapidjson::Value* v = values ? Member(*values, spec.label.c_str()) : nullptr;
      if (v == nullptr || !v->IsNumber()) return OkStatus();  // another label
      LabelRow l;
      const rapidjson::Value* rid = Member(doc, "request_id");
      l.request_id = rid && rid->IsString() ? rid->GetString() : "";
      l.entities = Entities(Member(doc, "entity_ids"));
      l.time_ms = Int(Member(doc, "time_ms"));
      l.received_ms = Int(Member(doc, "received_ms"));
      l.value = v->GetDouble();
      if (l.received_ms > cutoff_ms) {
        ++stats->labels_late;  // did not exist yet at the cut-off
        return OkStatus();
      }
      ++stats->labels;
      rows->push_back(std::move(l));
      return OkStatus();
    }));
  }
  return OkStatus();
}

}  // namespace

static StatusOr<Dataset> JoinOnce(const TrainingSpec& spec, int64_t cutoff_ms, JoinStats* stats,
                                  const std::function<void(const std::string&)>& progress) {
  std::vector<LabelRow> labels;
  RETURN_IF_ERROR(ReadLabels(spec, cutoff_ms, stats, &labels));
  progress(std::to_string(stats->labels) + " labels '" + spec.label + "' received by the " +
           "cut-off (" + std::to_string(stats->labels_late) + " after it, ignored)");
  std::unordered_map<std::string, std::vector<LabelRow*>> by_request, by_entities;
  for (LabelRow& l : labels) {
    if (!l.request_id.empty()) {
      by_request[l.request_id].push_back(&l);
    } else if (!l.entities.empty()) {
      by_entities[l.entities].push_back(&l);
    }
  }
  std::vector<Prediction> predictions;
  std::unordered_set<std::string> seen;
  int width = 0;
  const auto files = DataFiles(spec.feedback);
  auto last_report = std::chrono::steady_clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    ++stats->files;
    RETURN_IF_ERROR(ForEachLine(files[i], [&](std::string_view text, size_t n) -> Status {
      rapidjson::Document doc;
      if (Status s = json::ParseJson(text, &doc); !s.ok()) {
        return InvalidArgument(files[i].string() + ":" + std::to_string(n) + ": " +
                               std::string(s.message()));
      }
      if (!FirstSeen(doc, &seen)) {
        ++stats->duplicates;
        return OkStatus();
      }
      Prediction p;
      bool other = false;
      const bool ok = ReadPrediction(doc, spec, &p, &width, &other);
      if (other) {
        ++stats->other_models;
      } else if (++stats->predictions; !ok || p.time_ms <= 0 || p.time_ms >= cutoff_ms) {
        ++stats->unusable;
      } else {
        predictions.push_back(std::move(p));
      }
      return OkStatus();
    }));
    if (std::chrono::steady_clock::now() - last_report > std::chrono::seconds(2)) {
      last_report = std::chrono::steady_clock::now();
      progress("feedback: " + std::to_string(i + 1) + "/" + std::to_string(files.size()) +
               " files, " + std::to_string(stats->predictions) + " predictions read");
    }
  }
  std::stable_sort(predictions.begin(), predictions.end(),
                   [](const Prediction& a, const Prediction& b) { return a.time_ms < b.time_ms; });
  Dataset d;
  d.num_features = width;
  for (const Prediction& p : predictions) {
    const int64_t end = p.time_ms + spec.window_ms;
    LabelRow* best = nullptr;
    auto pick = [&](const std::vector<LabelRow*>* list, bool by_time) {
      if (list == nullptr) return;
      for (LabelRow* l : *list) {
        const int64_t t = by_time ? l->time_ms : l->received_ms;
        if (t < p.time_ms || t > end) continue;
        if (best == nullptr || l->received_ms >= best->received_ms) best = l;
      }
    };
    if (!p.id.empty()) {
      auto it = by_request.find(p.id);
      pick(it == by_request.end() ? nullptr : &it->second, false);
    }
    if (best == nullptr && !p.entities.empty()) {
      auto it = by_entities.find(p.entities);
      pick(it == by_entities.end() ? nullptr : &it->second, true);
    }
    double y = 0;
    if (spec.has_unlabeled && end > cutoff_ms) {
      // Its window is still open: with a value for "no label" it is left out labelled or not;
      // keeping the labelled ones would fill the newest rows (the held-out ones) with the
      // outcomes that come as labels (frauds) and none of those that come as silence.
      if (best != nullptr) best->used = true;
      ++stats->left_out;
      continue;
    }
    if (best != nullptr) {
      best->used = true;
      y = best->value;
      ++stats->labeled;
    } else if (end <= cutoff_ms && spec.has_unlabeled) {
      y = spec.unlabeled;
      ++stats->defaulted;
    } else {
      ++stats->left_out;
      continue;
    }
    d.x.insert(d.x.end(), p.features.begin(), p.features.end());
    d.y.push_back(static_cast<float>(y));
    d.time_ms.push_back(p.time_ms);
  }
  for (const LabelRow& l : labels) stats->labels_unmatched += l.used ? 0 : 1;
  if (d.rows() == 0) {
    return FailedPrecondition("no labelled predictions of model '" + spec.model + "' before the " +
                              "cut-off (" + std::to_string(stats->predictions) +
                              " predictions read, " + std::to_string(stats->labels) +
                              " labels): nothing to train on");
  }
  return d;
}

StatusOr<Dataset> LoadRows(const std::string& dir) {
  Dataset d;
  for (const fs::path& file : DataFiles(dir)) {
    RETURN_IF_ERROR(ForEachLine(file, [&](std::string_view text, size_t n) -> Status {
      if (text.empty()) return OkStatus();
      const std::string at = file.string() + ":" + std::to_string(n) + ": ";
      rapidjson::Document doc;
      if (!json::ParseJson(text, &doc).ok() || !doc.IsObject()) {
        return InvalidArgument(at + "not a JSON object");
      }
      const rapidjson::Value* x = Member(doc, "x");
      const rapidjson::Value* y = Member(doc, "y");
      if (x == nullptr || !x->IsArray() || x->Empty()) {
        return InvalidArgument(at + "x: a non-empty array of numbers is needed");
      }
      if (y == nullptr || !y->IsNumber()) return InvalidArgument(at + "y: a number is needed");
      if (d.num_features == 0) d.num_features = static_cast<int>(x->Size());
      if (x->Size() != static_cast<rapidjson::SizeType>(d.num_features)) {
        return InvalidArgument(at + "x: " + std::to_string(x->Size()) + " values, the first row " +
                               std::to_string(d.num_features));
      }
      for (const auto& v : x->GetArray()) {
        if (!v.IsNumber()) return InvalidArgument(at + "x: a non-empty array of numbers is needed");
        d.x.push_back(static_cast<float>(v.GetDouble()));
      }
      d.y.push_back(static_cast<float>(y->GetDouble()));
      d.time_ms.push_back(0);
      return OkStatus();
    }));
  }
  if (d.rows() == 0) return FailedPrecondition(dir + ": no rows (dt=*/*.jsonl.gz)");
  return d;
}

Dataset Slice(const Dataset& d, int64_t from_ms, int64_t to_ms) {
  Dataset out;
  out.num_features = d.num_features;
  const size_t w = static_cast<size_t>(d.num_features);
  for (size_t i = 0; i < d.rows(); ++i) {
    if (d.time_ms[i] < from_ms || d.time_ms[i] >= to_ms) continue;
    out.x.insert(out.x.end(), d.x.begin() + static_cast<std::ptrdiff_t>(i * w),
                 d.x.begin() + static_cast<std::ptrdiff_t>((i + 1) * w));
    out.y.push_back(d.y[i]);
    out.time_ms.push_back(d.time_ms[i]);
  }
  return out;
}

// A file removed between the listing and its reading (a compaction moved its entries into a new
// file the listing may not hold): the whole read starts again, up to five times.
StatusOr<Dataset> JoinFeedbackAndLabels(const TrainingSpec& spec, int64_t cutoff_ms,
                                        JoinStats* stats,
                                        const std::function<void(const std::string&)>& progress) {
  for (int attempt = 1;; ++attempt) {
    JoinStats fresh;
    StatusOr<Dataset> d = JoinOnce(spec, cutoff_ms, &fresh, progress);
    const bool vanished = !d.ok() && d.status().code() == StatusCode::kNotFound &&
                          d.status().message().rfind("vanished: ", 0) == 0;
    if (!vanished || attempt == 5) {
      *stats = fresh;
      return d;
    }
    progress(std::string(d.status().message()) + " (compacted meanwhile): reading again");
  }
}

}  // namespace dais::learn
