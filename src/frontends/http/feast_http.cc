#include "frontends/http/feast_http.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <ctime>
#include <set>

#include "common/json.h"
#include "features/offline/offline_files.h"
#include "features/spec/feature_codec.h"
#include "fmt/format.h"

namespace dais::frontends::http {
namespace {

using namespace features;  // NOLINT: this file speaks the feature store's types

using rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

StatusOr<std::string> IdText(const Value& v, const std::string& where) {
  if (v.IsString()) return std::string(v.GetString(), v.GetStringLength());
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  return InvalidArgument(fmt::format("{}: an entity id must be an integer or a string", where));
}

// A pushed value. A JSON boolean is accepted for BOOL features only: `true` into a numeric
// feature is a client's mistake, not 1.
StatusOr<Scalar> ScalarOf(const Value& v, DataType dtype, const std::string& where) {
  if (v.IsBool()) {
    if (dtype == DataType::kBool) return Scalar::Int(v.GetBool() ? 1 : 0);
    return InvalidArgument(fmt::format("{}: a boolean for a {} feature (expected a number)", where,
                                       DataTypeName(dtype)));
  }
  if (v.IsInt64()) return Scalar::Int(v.GetInt64());
  if (v.IsNumber()) return Scalar::Real(v.GetDouble());
  return InvalidArgument(fmt::format("{}: expected a number", where));
}

// The spec that holds every group in `groups`, honouring an optional project (domain). When
// several specs of one domain declare the groups (two models during a schema migration), the
// one with the highest schema versions wins: the Feast API reads the newest layout.
StatusOr<FeatureSpecPtr> ChooseSpec(const std::vector<FeatureSpecPtr>& specs,
                                    const std::set<std::string>& groups,
                                    const std::string& project) {
  FeatureSpecPtr chosen;
  std::set<std::string> domains;
  for (const auto& s : specs) {
    if (!project.empty() && s->domain != project) continue;
    bool all = true;
    for (const auto& g : groups) all = all && s->GroupIndex(g) >= 0;
    if (!all) continue;
    auto versions = [&](const FeatureSpecPtr& x) {
      int64_t sum = 0;
      for (const auto& g : groups) sum += x->groups[static_cast<size_t>(x->GroupIndex(g))].version;
      return sum;
    };
    if (!chosen || versions(s) > versions(chosen)) chosen = s;
    domains.insert(s->domain);
  }
  if (!chosen) {
    std::string known;
    for (const auto& s : specs) {
      for (const auto& g : s->groups)
        known += (known.empty() ? "" : ", ") + s->domain + "/" + g.name;
    }
    std::string wanted;
    for (const auto& g : groups) wanted += (wanted.empty() ? "" : ", ") + g;
    return InvalidArgument(fmt::format("no feature spec{} declares the group(s) [{}]; known: [{}]",
                                       project.empty() ? "" : " in project " + project, wanted,
                                       known));
  }
  if (domains.size() > 1) {
    return InvalidArgument(
        "the feature groups exist in several projects (domains); name one with \"project\"");
  }
  return chosen;
}

void WriteValue(Writer& w, const FeatureDef& f, std::string_view bytes) {
  auto one = [&](int64_t i) {
    if (f.dtype == DataType::kBool) {
      w.Bool(ElementAsInt(f.dtype, bytes.data(), i) != 0);
    } else if (IsIntegerType(f.dtype)) {
      w.Int64(ElementAsInt(f.dtype, bytes.data(), i));
    } else {
      w.Double(ElementAsDouble(f.dtype, bytes.data(), i));
    }
  };
  if (f.shape.empty()) return one(0);
  w.StartArray();
  for (int64_t i = 0; i < f.elements; ++i) one(i);
  w.EndArray();
}

}  // namespace

FeastHttp::FeastHttp(FeatureStore* store, SpecList specs, ServiceSpec services, PushOptions push)
    : store_(store),
      specs_(std::move(specs)),
      services_(std::move(services)),
      push_(std::move(push)) {
  if (!push_.now_us) push_.now_us = UnixNowUs;
}

std::string IsoTimestamp(int64_t unix_us) {
  time_t secs = static_cast<time_t>(unix_us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

// A parsed /get-online-features request.
struct FeatureQuery {
  std::shared_ptr<rapidjson::Document> body;  // the entity columns are echoed back from it
  bool full_names = false;
  std::vector<FeatureRef> refs;
  std::vector<std::string> entity_order;
  std::vector<size_t> slot;  // per ref: index into lookup.groups
  LookupRequest lookup;
};

StatusOr<std::string> OptionalProject(const Value& d) {
  if (!d.HasMember("project")) return std::string();
  if (!d["project"].IsString()) return InvalidArgument("\"project\" must be a string");
  return std::string(d["project"].GetString(), d["project"].GetStringLength());
}

// "features": ["group:feature", ...] -> the spec that holds the groups and the references.
Status ResolveFeatureList(const Value& features, const std::vector<FeatureSpecPtr>& specs,
                          const std::string& project, FeatureSpecPtr* spec,
                          std::vector<FeatureRef>* refs) {
  std::set<std::string> groups;
  for (const Value& f : features.GetArray()) {
    if (!f.IsString()) return InvalidArgument("\"features\" must hold strings");
    std::string_view s(f.GetString(), f.GetStringLength());
    size_t c = s.find(':');
    if (c == std::string_view::npos) {
      return InvalidArgument(fmt::format("feature reference \"{}\" must be group:feature", s));
    }
    groups.emplace(s.substr(0, c));
  }
  ASSIGN_OR_RETURN(*spec, ChooseSpec(specs, groups, project));
  for (const Value& f : features.GetArray()) {
    ASSIGN_OR_RETURN(FeatureRef ref,
                     (*spec)->Resolve(std::string_view(f.GetString(), f.GetStringLength())));
    refs->push_back(ref);
  }
  return OkStatus();
}

// "entities": {"<entity>": [ids...], ...} -> the lookup's entity columns, in request order.
Status ParseEntities(const Value& columns, const FeatureSpec& spec, FeatureQuery* q) {
  size_t rows = 0;
  for (auto it = columns.MemberBegin(); it != columns.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const EntitySpec* e = spec.FindEntity(name);
    if (e == nullptr) return InvalidArgument(fmt::format("entities: unknown entity \"{}\"", name));
    if (!it->value.IsArray() || it->value.Empty()) {
      return InvalidArgument(fmt::format("entities.{} must be a non-empty list of ids", name));
    }
    if (q->lookup.entities.count(name)) {
      return InvalidArgument(fmt::format("entities: \"{}\" is given twice", name));
    }
    if (rows != 0 && it->value.Size() != rows) {
      return InvalidArgument("every entity column must have the same length");
    }
    rows = it->value.Size();
    auto& col = q->lookup.entities[name];
    for (rapidjson::SizeType i = 0; i < it->value.Size(); ++i) {
      std::string where = fmt::format("entities.{}[{}]", name, i);
      ASSIGN_OR_RETURN(std::string text, IdText(it->value[i], where));
      auto id = CanonicalEntityId(e->key_type, text);
      if (!id.ok()) return InvalidArgument(fmt::format("{}: {}", where, id.status().message()));
      col.push_back(std::move(id).value());
    }
    q->entity_order.push_back(name);
  }
  return OkStatus();
}

// The groups the lookup reads, and per reference the group's slot among them.
Status AssignGroups(const FeatureSpec& spec, FeatureQuery* q) {
  for (const auto& r : q->refs) {
    const GroupSpec& g = spec.groups[r.group];
    if (!q->lookup.entities.count(g.entity)) {
      return InvalidArgument(
          fmt::format("feature group {} is keyed by entity \"{}\", which is not in \"entities\"",
                      g.name, g.entity));
    }
    auto pos = std::find(q->lookup.groups.begin(), q->lookup.groups.end(), r.group);
    q->slot.push_back(static_cast<size_t>(pos - q->lookup.groups.begin()));
    if (pos == q->lookup.groups.end()) q->lookup.groups.push_back(r.group);
  }
  return OkStatus();
}

void WriteFeatureNames(Writer& w, const FeatureQuery& q, const FeatureSpec& spec) {
  w.Key("metadata");
  w.StartObject();
  w.Key("feature_names");
  w.StartArray();
  for (const auto& e : q.entity_order) w.String(e.c_str());
  for (const auto& r : q.refs) {
    const GroupSpec& g = spec.groups[r.group];
    const std::string& feature = g.features[r.feature].name;
    w.String((q.full_names ? g.name + "__" + feature : feature).c_str());
  }
  w.EndArray();
  w.EndObject();
}

// The entity columns as the client sent them, each value PRESENT.
void WriteEntityColumns(Writer& w, const FeatureQuery& q, size_t rows) {
  const Value& ents = (*q.body)["entities"];
  for (const auto& e : q.entity_order) {
    w.StartObject();
    w.Key("values");
    ents[e.c_str()].Accept(w);
    w.Key("statuses");
    w.StartArray();
    for (size_t i = 0; i < rows; ++i) w.String("PRESENT");
    w.EndArray();
    w.Key("event_timestamps");
    w.StartArray();
    for (size_t i = 0; i < rows; ++i) w.String("1970-01-01T00:00:00Z");
    w.EndArray();
    w.EndObject();
  }
}

void WriteFeatureColumn(Writer& w, const FeatureQuery& q, size_t k, const LookupResult& res) {
  const FeatureRef& ref = q.refs[k];
  const FeatureDef& f = res.spec->groups[ref.group].features[ref.feature];
  const size_t slot = q.slot[k];
  w.StartObject();
  w.Key("values");
  w.StartArray();
  for (size_t row = 0; row < res.rows; ++row) {
    if (res.statuses[res.Index(row, slot)] == FeatureStatus::kNotFound) {
      w.Null();
    } else {
      WriteValue(w, f, res.Value(row, slot, ref.feature, /*stale_ok=*/true));
    }
  }
  w.EndArray();
  w.Key("statuses");
  w.StartArray();
  for (size_t row = 0; row < res.rows; ++row) {
    FeatureStatus st = res.statuses[res.Index(row, slot)];
    w.String(st == FeatureStatus::kStale ? "OUTSIDE_MAX_AGE"
                                         : std::string(FeatureStatusName(st)).c_str());
  }
  w.EndArray();
  w.Key("event_timestamps");
  w.StartArray();
  for (size_t row = 0; row < res.rows; ++row) {
    w.String(IsoTimestamp(res.EventTimeUs(row, slot)).c_str());
  }
  w.EndArray();
  w.EndObject();
}

std::string FeaturesResponse(const FeatureQuery& q, const LookupResult& res) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  WriteFeatureNames(w, q, *res.spec);
  w.Key("results");
  w.StartArray();
  WriteEntityColumns(w, q, res.rows);
  for (size_t k = 0; k < q.refs.size(); ++k) WriteFeatureColumn(w, q, k, res);
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

StatusOr<FeatureSpecPtr> RequestedFeatures(const Value& d, const FeastHttp::SpecList& specs,
                                           const FeastHttp::ServiceSpec& services,
                                           std::vector<FeatureRef>* refs) {
  ASSIGN_OR_RETURN(std::string project, OptionalProject(d));
  if (d.HasMember("feature_service")) {
    if (!d["feature_service"].IsString()) {
      return InvalidArgument("\"feature_service\" must be a string (a model name)");
    }
    std::string service = d["feature_service"].GetString();
    FeatureSpecPtr spec = services(service);
    if (!spec) {
      return NotFound(fmt::format(
          "feature service \"{}\": no loaded model of that name declares features", service));
    }
    for (const auto& m : spec->inputs) refs->insert(refs->end(), m.refs.begin(), m.refs.end());
    return spec;
  }
  if (d.HasMember("features") && d["features"].IsArray() && !d["features"].Empty()) {
    FeatureSpecPtr spec;
    RETURN_IF_ERROR(ResolveFeatureList(d["features"], specs(), project, &spec, refs));
    return spec;
  }
  return InvalidArgument(
      "give \"features\" (a non-empty list of group:feature) or \"feature_service\"");
}

Status ParseFeatureQuery(std::string_view body, const FeastHttp::SpecList& specs,
                         const FeastHttp::ServiceSpec& services, int max_json_depth,
                         FeatureQuery* q) {
  q->body = std::make_shared<rapidjson::Document>();
  rapidjson::Document& d = *q->body;
  RETURN_IF_ERROR(json::ParseJson(body, &d, max_json_depth));
  if (!d.IsObject()) return InvalidArgument("the body must be a JSON object");
  q->full_names = d.HasMember("full_feature_names") && d["full_feature_names"].IsBool() &&
                  d["full_feature_names"].GetBool();
  ASSIGN_OR_RETURN(FeatureSpecPtr spec, RequestedFeatures(d, specs, services, &q->refs));
  if (!d.HasMember("entities") || !d["entities"].IsObject() || d["entities"].MemberCount() == 0) {
    return InvalidArgument(
        "\"entities\" must be an object of entity columns, e.g. {\"user_id\": [1, 2]}");
  }
  q->lookup.spec = spec;
  RETURN_IF_ERROR(ParseEntities(d["entities"], *spec, q));
  return AssignGroups(*spec, q);
}

}  // namespace

void FeastHttp::GetOnlineFeatures(std::string_view body, Done done) {
  auto q = std::make_shared<FeatureQuery>();
  Status s = ParseFeatureQuery(body, specs_, services_, max_json_depth_, q.get());
  if (!s.ok()) return done(s);
  LookupRequest lookup = std::move(q->lookup);
  store_->Lookup(std::move(lookup),
                 [q, done](LookupResult res) { done(FeaturesResponse(*q, res)); });
}

namespace {

// A /push request's group and its columns in the body.
struct PushColumns {
  FeatureSpecPtr spec;
  size_t group = 0;
  const Value* ids = nullptr;
  const Value* timestamps = nullptr;
  std::vector<const Value*> features;  // per feature of the group
  size_t rows = 0;
};

StatusOr<FeatureSpecPtr> PushSpec(const Value& d, const std::vector<FeatureSpecPtr>& specs,
                                  std::string* group) {
  if (!d.HasMember("push_source_name") || !d["push_source_name"].IsString()) {
    return InvalidArgument("\"push_source_name\" (the feature group) is required");
  }
  *group = d["push_source_name"].GetString();
  ASSIGN_OR_RETURN(std::string project, OptionalProject(d));
  if (d.HasMember("to") && d["to"].IsString() &&
      std::string_view(d["to"].GetString()) == "offline") {
    return InvalidArgument(
        "dais writes pushes to the online store only (\"to\": \"online\"); offline files are "
        "written by your batch jobs");
  }
  return ChooseSpec(specs, {*group}, project);
}

// Every column of "df" is the group's entity, event_timestamp, created or one of its features.
Status CheckColumnNames(const Value& df, const GroupSpec& g) {
  for (auto it = df.MemberBegin(); it != df.MemberEnd(); ++it) {
    std::string_view name(it->name.GetString(), it->name.GetStringLength());
    bool known = name == g.entity || name == "event_timestamp" || name == "created";
    for (const auto& f : g.features) known = known || name == f.name;
    if (!known) {
      std::string names;
      for (const auto& f : g.features) names += ", " + f.name;
      return InvalidArgument(
          fmt::format("df.{}: group {} has no such column (columns: {}, event_timestamp{})", name,
                      g.name, g.entity, names));
    }
  }
  return OkStatus();
}

StatusOr<PushColumns> FindPushColumns(const Value& d, const std::vector<FeatureSpecPtr>& specs) {
  PushColumns c;
  std::string group;
  ASSIGN_OR_RETURN(c.spec, PushSpec(d, specs, &group));
  c.group = static_cast<size_t>(c.spec->GroupIndex(group));
  const GroupSpec& g = c.spec->groups[c.group];
  if (!d.HasMember("df") || !d["df"].IsObject()) {
    return InvalidArgument("\"df\" must be an object of columns");
  }
  const Value& df = d["df"];
  auto column = [&](const std::string& name) -> const Value* {
    auto it = df.FindMember(name.c_str());
    return it == df.MemberEnd() || !it->value.IsArray() ? nullptr : &it->value;
  };
  c.ids = column(g.entity);
  c.timestamps = column("event_timestamp");
  if (!c.ids) return InvalidArgument(fmt::format("df.{} (entity ids) is required", g.entity));
  if (!c.timestamps) return InvalidArgument("df.event_timestamp is required");
  c.rows = c.ids->Size();
  if (c.timestamps->Size() != c.rows) {
    return InvalidArgument("df columns must all have the same length");
  }
  RETURN_IF_ERROR(CheckColumnNames(df, g));
  for (const auto& f : g.features) {
    const Value* col = column(f.name);
    if (!col) {
      return InvalidArgument(
          fmt::format("df.{}: group {} needs every feature column", f.name, g.name));
    }
    if (col->Size() != c.rows) return InvalidArgument("df columns must all have the same length");
    c.features.push_back(col);
  }
  return c;
}

// Appends one pushed value (null: the feature's default) to `payload`.
Status AppendPushedValue(const Value& v, const FeatureDef& f, const std::string& where,
                         std::string* payload) {
  if (v.IsNull()) {
    *payload += f.default_bytes;
    return OkStatus();
  }
  if (f.shape.empty() ? v.IsArray() : (!v.IsArray() || v.Size() != f.elements)) {
    return InvalidArgument(
        f.shape.empty() ? fmt::format("{}: expected a number", where)
                        : fmt::format("{}: expected a list of {} numbers", where, f.elements));
  }
  auto append = [&](const Value& x) -> Status {
    ASSIGN_OR_RETURN(Scalar s, ScalarOf(x, f.dtype, where));
    Status st = AppendElement(f.dtype, s, payload);
    return st.ok() ? st : InvalidArgument(where + ": " + st.message());
  };
  if (!v.IsArray()) return append(v);
  for (const Value& x : v.GetArray()) RETURN_IF_ERROR(append(x));
  return OkStatus();
}

StatusOr<int64_t> PushedEventTime(const Value& t, size_t row) {
  StatusOr<int64_t> us = t.IsString()   ? ParseTimestampUs(t.GetString())
                         : t.IsNumber() ? ParseTimestampUs(fmt::format("{}", t.GetDouble()))
                                        : StatusOr<int64_t>(InvalidArgument("not a timestamp"));
  if (!us.ok()) {
    return InvalidArgument(fmt::format("df.event_timestamp[{}]: {}", row, us.status().message()));
  }
  return us;
}

// InvalidArgument for an event time before 1970 or beyond now + max_future_skew.
Status CheckEventTime(const PushOptions& push, int64_t us, size_t row) {
  if (us < 0) {
    return InvalidArgument(
        fmt::format("df.event_timestamp[{}]: {} is before 1970 (negative)", row, us / 1000000));
  }
  const int64_t limit = push.now_us() + push.max_future_skew.count();
  if (us > limit) {
    return InvalidArgument(fmt::format(
        "df.event_timestamp[{}]: {} is more than {} s in the future (--feature-max-future-skew)",
        row, IsoTimestamp(us), push.max_future_skew.count() / 1000000));
  }
  return OkStatus();
}

StatusOr<PushRow> ParsePushRow(const PushColumns& c, size_t r, const PushOptions& push) {
  const GroupSpec& g = c.spec->groups[c.group];
  const auto i = static_cast<rapidjson::SizeType>(r);
  PushRow row;
  row.group = c.group;
  std::string where = fmt::format("df.{}[{}]", g.entity, r);
  ASSIGN_OR_RETURN(std::string text, IdText((*c.ids)[i], where));
  auto id = CanonicalEntityId(c.spec->FindEntity(g.entity)->key_type, text);
  if (!id.ok()) return InvalidArgument(where + ": " + id.status().message());
  row.entity_id = std::move(id).value();
  ASSIGN_OR_RETURN(row.event_time_us, PushedEventTime((*c.timestamps)[i], r));
  RETURN_IF_ERROR(CheckEventTime(push, row.event_time_us, r));
  for (size_t k = 0; k < g.features.size(); ++k) {
    const FeatureDef& f = g.features[k];
    RETURN_IF_ERROR(AppendPushedValue((*c.features[k])[i], f, fmt::format("df.{}[{}]", f.name, r),
                                      &row.payload));
  }
  return row;
}

}  // namespace

void FeastHttp::Push(std::string_view body, Done done) {
  rapidjson::Document d;
  if (Status s = json::ParseJson(body, &d, max_json_depth_); !s.ok()) return done(s);
  if (!d.IsObject()) return done(InvalidArgument("the body must be a JSON object"));
  StatusOr<PushColumns> columns = FindPushColumns(d, specs_());
  if (!columns.ok()) return done(columns.status());
  std::vector<PushRow> rows;
  rows.reserve(columns->rows);
  for (size_t r = 0; r < columns->rows; ++r) {
    StatusOr<PushRow> row = ParsePushRow(*columns, r, push_);
    if (!row.ok()) return done(row.status());
    rows.push_back(std::move(row).value());
  }
  store_->Push(columns->spec, std::move(rows), [done](std::vector<StatusOr<bool>> results) {
    int64_t written = 0, older = 0;
    for (const auto& r : results) {
      // Whatever failed in the online store (not connected, no answer within the push deadline,
      // an error reply), the client sees one retryable code: 503.
      if (!r.ok()) return done(Unavailable("online store write failed: " + r.status().message()));
      (*r ? written : older)++;
    }
    done(fmt::format("{{\"written\":{},\"skipped_older\":{}}}", written, older));
  });
}

}  // namespace dais::frontends::http
