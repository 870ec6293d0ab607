#include "features/feast_api.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <ctime>
#include <set>

#include "common/json.h"
#include "common/utf8.h"
#include "features/feature_codec.h"
#include "features/offline_files.h"
#include "fmt/format.h"

namespace dais::features {
namespace {

using rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

std::string ErrorBody(std::string_view message) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("error");
  const std::string text = EscapeInvalidUtf8(message);  // it may quote what the client sent
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  w.EndObject();
  return sb.GetString();
}

void Fail(const FeastApi::Done& done, const Status& s) {
  int code = s.code() == StatusCode::kInvalidArgument ? 400
             : s.code() == StatusCode::kNotFound      ? 404
             : s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kResourceExhausted
                 ? 503
                 : 500;
  done(code, ErrorBody(s.message()));
}

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

FeastApi::FeastApi(FeatureStore* store, SpecList specs, ServiceSpec services, PushOptions push)
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

void FeastApi::GetOnlineFeatures(std::string_view body, Done done) {
  rapidjson::Document d;
  if (Status s = json::ParseJson(body, &d); !s.ok()) return Fail(done, s);
  if (!d.IsObject()) {
    return Fail(done, InvalidArgument("the body must be a JSON object"));
  }
  std::string project;
  if (d.HasMember("project")) {
    if (!d["project"].IsString())
      return Fail(done, InvalidArgument("\"project\" must be a string"));
    project = d["project"].GetString();
  }
  bool full_names = d.HasMember("full_feature_names") && d["full_feature_names"].IsBool() &&
                    d["full_feature_names"].GetBool();
  FeatureSpecPtr spec;
  std::vector<FeatureRef> refs;
  if (d.HasMember("feature_service")) {
    if (!d["feature_service"].IsString()) {
      return Fail(done, InvalidArgument("\"feature_service\" must be a string (a model name)"));
    }
    std::string service = d["feature_service"].GetString();
    spec = services_(service);
    if (!spec) {
      return Fail(done, NotFound(fmt::format("feature service \"{}\": no loaded model of that "
                                             "name declares features",
                                             service)));
    }
    for (const auto& m : spec->inputs) refs.insert(refs.end(), m.refs.begin(), m.refs.end());
  } else if (d.HasMember("features") && d["features"].IsArray() && !d["features"].Empty()) {
    std::set<std::string> groups;
    for (const Value& f : d["features"].GetArray()) {
      if (!f.IsString()) return Fail(done, InvalidArgument("\"features\" must hold strings"));
      std::string_view s(f.GetString(), f.GetStringLength());
      size_t c = s.find(':');
      if (c == std::string_view::npos) {
        return Fail(done, InvalidArgument(
                              fmt::format("feature reference \"{}\" must be group:feature", s)));
      }
      groups.emplace(s.substr(0, c));
    }
    auto chosen = ChooseSpec(specs_(), groups, project);
    if (!chosen.ok()) return Fail(done, chosen.status());
    spec = *chosen;
    for (const Value& f : d["features"].GetArray()) {
      auto ref = spec->Resolve(std::string_view(f.GetString(), f.GetStringLength()));
      if (!ref.ok()) return Fail(done, ref.status());
      refs.push_back(*ref);
    }
  } else {
    return Fail(done, InvalidArgument("give \"features\" (a non-empty list of group:feature) or "
                                      "\"feature_service\""));
  }
  if (!d.HasMember("entities") || !d["entities"].IsObject() || d["entities"].MemberCount() == 0) {
    return Fail(done, InvalidArgument("\"entities\" must be an object of entity columns, e.g. "
                                      "{\"user_id\": [1, 2]}"));
  }
  LookupRequest req;
  req.spec = spec;
  std::vector<std::string> entity_order;
  size_t rows = 0;
  const Value& entity_columns = d["entities"];
  for (auto it = entity_columns.MemberBegin(); it != entity_columns.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const EntitySpec* e = spec->FindEntity(name);
    if (e == nullptr) {
      return Fail(done, InvalidArgument(fmt::format("entities: unknown entity \"{}\"", name)));
    }
    if (!it->value.IsArray() || it->value.Empty()) {
      return Fail(
          done, InvalidArgument(fmt::format("entities.{} must be a non-empty list of ids", name)));
    }
    if (req.entities.count(name)) {
      return Fail(done, InvalidArgument(fmt::format("entities: \"{}\" is given twice", name)));
    }
    if (rows != 0 && it->value.Size() != rows) {
      return Fail(done, InvalidArgument("every entity column must have the same length"));
    }
    rows = it->value.Size();
    auto& col = req.entities[name];
    for (rapidjson::SizeType i = 0; i < it->value.Size(); ++i) {
      std::string where = fmt::format("entities.{}[{}]", name, i);
      auto text = IdText(it->value[i], where);
      if (!text.ok()) return Fail(done, text.status());
      auto id = CanonicalEntityId(e->key_type, *text);
      if (!id.ok()) {
        return Fail(done, InvalidArgument(fmt::format("{}: {}", where, id.status().message())));
      }
      col.push_back(std::move(id).value());
    }
    entity_order.push_back(name);
  }
  std::vector<size_t> slot;  // per ref: index into req.groups
  for (const auto& r : refs) {
    const GroupSpec& g = spec->groups[r.group];
    if (!req.entities.count(g.entity)) {
      return Fail(done, InvalidArgument(fmt::format(
                            "feature group {} is keyed by entity \"{}\", which is not in "
                            "\"entities\"",
                            g.name, g.entity)));
    }
    auto pos = std::find(req.groups.begin(), req.groups.end(), r.group);
    slot.push_back(static_cast<size_t>(pos - req.groups.begin()));
    if (pos == req.groups.end()) req.groups.push_back(r.group);
  }
  // The raw request columns are echoed back as Feast does (entity values first).
  auto echo = std::make_shared<rapidjson::Document>(std::move(d));
  store_->Lookup(
      std::move(req), [echo, entity_order, refs, slot, full_names, done](LookupResult res) {
        const FeatureSpec& spec = *res.spec;
        rapidjson::StringBuffer sb;
        Writer w(sb);
        w.StartObject();
        w.Key("metadata");
        w.StartObject();
        w.Key("feature_names");
        w.StartArray();
        for (const auto& e : entity_order) w.String(e.c_str());
        for (const auto& r : refs) {
          const GroupSpec& g = spec.groups[r.group];
          std::string n =
              full_names ? g.name + "__" + g.features[r.feature].name : g.features[r.feature].name;
          w.String(n.c_str());
        }
        w.EndArray();
        w.EndObject();
        w.Key("results");
        w.StartArray();
        const Value& ents = (*echo)["entities"];
        for (const auto& e : entity_order) {
          w.StartObject();
          w.Key("values");
          ents[e.c_str()].Accept(w);
          w.Key("statuses");
          w.StartArray();
          for (size_t i = 0; i < res.rows; ++i) w.String("PRESENT");
          w.EndArray();
          w.Key("event_timestamps");
          w.StartArray();
          for (size_t i = 0; i < res.rows; ++i) w.String("1970-01-01T00:00:00Z");
          w.EndArray();
          w.EndObject();
        }
        for (size_t k = 0; k < refs.size(); ++k) {
          const FeatureDef& f = spec.groups[refs[k].group].features[refs[k].feature];
          w.StartObject();
          w.Key("values");
          w.StartArray();
          for (size_t row = 0; row < res.rows; ++row) {
            FeatureStatus st = res.statuses[res.Index(row, slot[k])];
            if (st == FeatureStatus::kNotFound) {
              w.Null();
            } else {
              WriteValue(w, f, res.Value(row, slot[k], refs[k].feature, /*stale_ok=*/true));
            }
          }
          w.EndArray();
          w.Key("statuses");
          w.StartArray();
          for (size_t row = 0; row < res.rows; ++row) {
            FeatureStatus st = res.statuses[res.Index(row, slot[k])];
            w.String(st == FeatureStatus::kStale ? "OUTSIDE_MAX_AGE"
                                                 : std::string(FeatureStatusName(st)).c_str());
          }
          w.EndArray();
          w.Key("event_timestamps");
          w.StartArray();
          for (size_t row = 0; row < res.rows; ++row) {
            w.String(IsoTimestamp(res.EventTimeUs(row, slot[k])).c_str());
          }
          w.EndArray();
          w.EndObject();
        }
        w.EndArray();
        w.EndObject();
        done(200, sb.GetString());
      });
}

Status FeastApi::CheckEventTime(int64_t us, size_t row) const {
  if (us < 0) {
    return InvalidArgument(
        fmt::format("df.event_timestamp[{}]: {} is before 1970 (negative)", row, us / 1000000));
  }
  const int64_t limit = push_.now_us() + push_.max_future_skew.count();
  if (us > limit) {
    return InvalidArgument(fmt::format(
        "df.event_timestamp[{}]: {} is more than {} s in the future (--feature-max-future-skew)",
        row, IsoTimestamp(us), push_.max_future_skew.count() / 1000000));
  }
  return OkStatus();
}

void FeastApi::Push(std::string_view body, Done done) {
  rapidjson::Document d;
  if (Status s = json::ParseJson(body, &d); !s.ok()) return Fail(done, s);
  if (!d.IsObject()) {
    return Fail(done, InvalidArgument("the body must be a JSON object"));
  }
  if (!d.HasMember("push_source_name") || !d["push_source_name"].IsString()) {
    return Fail(done, InvalidArgument("\"push_source_name\" (the feature group) is required"));
  }
  std::string group_name = d["push_source_name"].GetString();
  std::string project;
  if (d.HasMember("project")) {
    if (!d["project"].IsString())
      return Fail(done, InvalidArgument("\"project\" must be a string"));
    project = d["project"].GetString();
  }
  if (d.HasMember("to") && d["to"].IsString() &&
      std::string_view(d["to"].GetString()) == "offline") {
    return Fail(done, InvalidArgument("dais writes pushes to the online store only (\"to\": "
                                      "\"online\"); offline files are written by your batch jobs"));
  }
  auto chosen = ChooseSpec(specs_(), {group_name}, project);
  if (!chosen.ok()) return Fail(done, chosen.status());
  FeatureSpecPtr spec = *chosen;
  size_t gi = static_cast<size_t>(spec->GroupIndex(group_name));
  const GroupSpec& g = spec->groups[gi];
  const EntitySpec* entity = spec->FindEntity(g.entity);
  if (!d.HasMember("df") || !d["df"].IsObject()) {
    return Fail(done, InvalidArgument("\"df\" must be an object of columns"));
  }
  const Value& df = d["df"];
  auto column = [&](const std::string& name) -> const Value* {
    auto it = df.FindMember(name.c_str());
    return it == df.MemberEnd() || !it->value.IsArray() ? nullptr : &it->value;
  };
  const Value* ids = column(g.entity);
  const Value* ts = column("event_timestamp");
  if (!ids)
    return Fail(done, InvalidArgument(fmt::format("df.{} (entity ids) is required", g.entity)));
  if (!ts) return Fail(done, InvalidArgument("df.event_timestamp is required"));
  size_t rows = ids->Size();
  if (ts->Size() != rows) {
    return Fail(done, InvalidArgument("df columns must all have the same length"));
  }
  for (auto it = df.MemberBegin(); it != df.MemberEnd(); ++it) {
    std::string_view name(it->name.GetString(), it->name.GetStringLength());
    bool known = name == g.entity || name == "event_timestamp" || name == "created";
    for (const auto& f : g.features) known = known || name == f.name;
    if (!known) {
      std::string names;
      for (const auto& f : g.features) names += ", " + f.name;
      return Fail(done, InvalidArgument(fmt::format(
                            "df.{}: group {} has no such column (columns: {}, event_timestamp{})",
                            name, g.name, g.entity, names)));
    }
  }
  std::vector<const Value*> cols;
  for (const auto& f : g.features) {
    const Value* c = column(f.name);
    if (!c) {
      return Fail(done, InvalidArgument(fmt::format("df.{}: group {} needs every feature column",
                                                    f.name, g.name)));
    }
    if (c->Size() != rows) {
      return Fail(done, InvalidArgument("df columns must all have the same length"));
    }
    cols.push_back(c);
  }
  std::vector<PushRow> out;
  out.reserve(rows);
  for (rapidjson::SizeType r = 0; r < rows; ++r) {
    PushRow row;
    row.group = gi;
    std::string where = fmt::format("df.{}[{}]", g.entity, r);
    auto text = IdText((*ids)[r], where);
    if (!text.ok()) return Fail(done, text.status());
    auto id = CanonicalEntityId(entity->key_type, *text);
    if (!id.ok()) return Fail(done, InvalidArgument(where + ": " + id.status().message()));
    row.entity_id = std::move(id).value();
    const Value& t = (*ts)[r];
    StatusOr<int64_t> us = t.IsString()   ? ParseTimestampUs(t.GetString())
                           : t.IsNumber() ? ParseTimestampUs(fmt::format("{}", t.GetDouble()))
                                          : StatusOr<int64_t>(InvalidArgument("not a timestamp"));
    if (!us.ok()) {
      return Fail(done, InvalidArgument(
                            fmt::format("df.event_timestamp[{}]: {}", r, us.status().message())));
    }
    if (Status s = CheckEventTime(*us, r); !s.ok()) return Fail(done, s);
    row.event_time_us = *us;
    for (size_t k = 0; k < g.features.size(); ++k) {
      const FeatureDef& f = g.features[k];
      const Value& v = (*cols[k])[r];
      std::string fw = fmt::format("df.{}[{}]", f.name, r);
      if (v.IsNull()) {
        row.payload += f.default_bytes;
        continue;
      }
      if (f.shape.empty() ? v.IsArray() : (!v.IsArray() || v.Size() != f.elements)) {
        return Fail(
            done, InvalidArgument(f.shape.empty() ? fmt::format("{}: expected a number", fw)
                                                  : fmt::format("{}: expected a list of {} numbers",
                                                                fw, f.elements)));
      }
      auto append = [&](const Value& x) -> Status {
        ASSIGN_OR_RETURN(Scalar s, ScalarOf(x, f.dtype, fw));
        Status st = AppendElement(f.dtype, s, &row.payload);
        return st.ok() ? st : InvalidArgument(fw + ": " + st.message());
      };
      if (v.IsArray()) {
        for (const Value& x : v.GetArray()) {
          if (Status s = append(x); !s.ok()) return Fail(done, s);
        }
      } else if (Status s = append(v); !s.ok()) {
        return Fail(done, s);
      }
    }
    out.push_back(std::move(row));
  }
  store_->Push(spec, std::move(out), [done](std::vector<StatusOr<bool>> results) {
    int64_t written = 0, older = 0;
    for (const auto& r : results) {
      // Whatever failed in the online store (not connected, no answer within the push deadline,
      // an error reply), the client sees one retryable code: 503.
      if (!r.ok()) {
        return Fail(done, Unavailable("online store write failed: " + r.status().message()));
      }
      (*r ? written : older)++;
    }
    done(200, fmt::format("{{\"written\":{},\"skipped_older\":{}}}", written, older));
  });
}

}  // namespace dais::features
