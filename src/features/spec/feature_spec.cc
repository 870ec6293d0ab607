#include "features/spec/feature_spec.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "features/spec/feature_codec.h"
#include "fmt/format.h"

namespace dais::features {
namespace {

constexpr int64_t kMaxElements = 1 << 20;

// Errors carry "<file>: <where>: <what>" and the YAML line when there is one.
class Ctx {
 public:
  explicit Ctx(const std::string& source) : source_(source) {}
  Status Error(const YAML::Node& node, std::string_view where, std::string_view what) const {
    std::string at;
    if (node.IsDefined() && node.Mark().line >= 0) at = fmt::format(":{}", node.Mark().line + 1);
    return InvalidArgument(fmt::format("{}{}: {}: {}", source_, at, where, what));
  }
  Status Error(std::string_view where, std::string_view what) const {
    return InvalidArgument(fmt::format("{}: {}: {}", source_, where, what));
  }

 private:
  const std::string& source_;
};

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

StatusOr<std::string> NameField(const Ctx& ctx, const YAML::Node& n, std::string_view where) {
  const YAML::Node name = n["name"];
  if (!name || !name.IsScalar()) return ctx.Error(n, where, "`name` is required");
  std::string s = name.as<std::string>();
  if (!ValidName(s)) {
    return ctx.Error(name, where,
                     fmt::format("name \"{}\" must be 1-128 characters of [A-Za-z0-9_.-]", s));
  }
  return s;
}

StatusOr<Scalar> ScalarOf(const YAML::Node& n) {
  std::string s = n.as<std::string>();
  if (s == "true" || s == "True") return Scalar::Int(1);
  if (s == "false" || s == "False") return Scalar::Int(0);
  int64_t i;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && p == s.data() + s.size()) return Scalar::Int(i);
  double d;
  auto [p2, ec2] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec2 == std::errc() && p2 == s.data() + s.size()) return Scalar::Real(d);
  return InvalidArgument(fmt::format("\"{}\" is not a number", s));
}

Status ParseFeature(const Ctx& ctx, const YAML::Node& n, const std::string& where, FeatureDef* f) {
  ASSIGN_OR_RETURN(f->name, NameField(ctx, n, where));
  std::string fw = fmt::format("{} feature {}", where, f->name);
  if (!n["dtype"]) return ctx.Error(n, fw, "`dtype` is required");
  std::string dt = n["dtype"].as<std::string>();
  if (dt.starts_with("TYPE_")) dt = dt.substr(5);
  f->dtype = DataTypeFromName(dt);
  if (!IsFeatureType(f->dtype)) {
    return ctx.Error(n["dtype"], fw,
                     fmt::format("dtype \"{}\" is not one of BOOL, INT8, UINT8, INT32, INT64, "
                                 "FP32, FP64",
                                 dt));
  }
  f->shape.clear();
  f->elements = 1;
  if (const YAML::Node shape = n["shape"]) {
    if (!shape.IsSequence()) return ctx.Error(shape, fw, "`shape` must be a list, e.g. [4]");
    for (const auto& d : shape) {
      int64_t v = -1;
      try {
        v = d.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
      if (v <= 0) return ctx.Error(d, fw, "every `shape` dimension must be a positive integer");
      f->shape.push_back(v);
      f->elements *= v;
      if (f->elements > kMaxElements) {
        return ctx.Error(shape, fw, fmt::format("more than {} elements", kMaxElements));
      }
    }
  }
  f->byte_size = static_cast<size_t>(f->elements) * DataTypeSize(f->dtype);
  f->default_bytes.clear();
  const YAML::Node def = n["default"];
  std::vector<YAML::Node> values;
  if (!def) {
    values.push_back(YAML::Node("0"));
  } else if (def.IsScalar()) {
    values.push_back(def);
  } else if (def.IsSequence()) {
    if (static_cast<int64_t>(def.size()) != f->elements) {
      return ctx.Error(
          def, fw,
          fmt::format("`default` has {} values but the shape holds {}", def.size(), f->elements));
    }
    for (const auto& v : def) values.push_back(v);
  } else {
    return ctx.Error(def, fw, "`default` must be a number or a list of numbers");
  }
  for (int64_t k = 0; k < f->elements; ++k) {
    const YAML::Node& v = values.size() == 1 ? values[0] : values[static_cast<size_t>(k)];
    if (!v.IsScalar()) return ctx.Error(v, fw, "`default` values must be numbers");
    auto s = ScalarOf(v);
    Status st = s.ok() ? AppendElement(f->dtype, *s, &f->default_bytes) : s.status();
    if (!st.ok()) return ctx.Error(v, fw, fmt::format("`default`: {}", st.message()));
  }
  return OkStatus();
}

Status ParseGroup(const Ctx& ctx, const YAML::Node& n, const FeatureSpec& spec, GroupSpec* g) {
  if (!n.IsMap()) return ctx.Error(n, "feature_groups", "each group must be a mapping");
  ASSIGN_OR_RETURN(g->name, NameField(ctx, n, "feature_groups"));
  std::string where = fmt::format("group {}", g->name);
  if (!n["entity"]) return ctx.Error(n, where, "`entity` is required");
  g->entity = n["entity"].as<std::string>();
  if (!spec.FindEntity(g->entity)) {
    return ctx.Error(n["entity"], where,
                     fmt::format("entity \"{}\" is not declared under `entities`", g->entity));
  }
  if (const YAML::Node v = n["version"]) {
    try {
      g->version = v.as<int64_t>();
    } catch (const YAML::Exception&) {
      g->version = -1;
    }
    if (g->version < 1) return ctx.Error(v, where, "`version` must be a positive integer");
  }
  for (const char* field : {"max_age", "ttl"}) {
    const YAML::Node v = n[field];
    if (!v) continue;
    auto us = ParseDurationUs(v.as<std::string>());
    if (!us.ok()) return ctx.Error(v, where, fmt::format("`{}`: {}", field, us.status().message()));
    if (std::string_view(field) == "max_age") {
      g->max_age_us = *us;
    } else {
      g->ttl_ms = *us / 1000;
    }
  }
  if (const YAML::Node v = n["ttl_jitter"]) {
    try {
      g->ttl_jitter = v.as<double>();
    } catch (const YAML::Exception&) {
      g->ttl_jitter = -1;
    }
    if (g->ttl_jitter < 0 || g->ttl_jitter > 1) {
      return ctx.Error(v, where, "`ttl_jitter` must be between 0 and 1");
    }
  }
  const YAML::Node fs = n["features"];
  if (!fs || !fs.IsSequence() || fs.size() == 0) {
    return ctx.Error(n, where, "`features` must be a non-empty list");
  }
  std::set<std::string> seen;
  for (const auto& fn : fs) {
    if (!fn.IsMap()) return ctx.Error(fn, where, "each feature must be a mapping");
    FeatureDef f;
    RETURN_IF_ERROR(ParseFeature(ctx, fn, where, &f));
    if (f.name.starts_with("_")) {
      return ctx.Error(fn, where,
                       fmt::format("feature \"{}\": names starting with _ are "
                                   "reserved",
                                   f.name));
    }
    if (!seen.insert(f.name).second) {
      return ctx.Error(fn, where, fmt::format("feature \"{}\" is declared twice", f.name));
    }
    g->offsets.push_back(g->record_bytes);
    g->record_bytes += f.byte_size;
    g->features.push_back(std::move(f));
  }
  return OkStatus();
}

Status ParseKnn(const Ctx& ctx, const YAML::Node& n, FeatureSpec* spec) {
  if (!n.IsSequence()) return ctx.Error(n, "knn", "`knn` must be a list");
  for (const auto& e : n) {
    if (!e.IsMap()) return ctx.Error(e, "knn", "each knn lookup must be a mapping");
    KnnSpec k;
    ASSIGN_OR_RETURN(k.name, NameField(ctx, e, "knn"));
    const std::string where = fmt::format("knn {}", k.name);
    for (const auto& kv : e) {
      const std::string key = kv.first.as<std::string>();
      if (key != "name" && key != "collection" && key != "query" && key != "k" &&
          key != "min_score") {
        return ctx.Error(kv.first, where,
                         fmt::format("unknown field \"{}\" (name, collection, query, k, "
                                     "min_score)",
                                     key));
      }
    }
    if (!e["collection"] || !e["query"]) {
      return ctx.Error(e, where, "needs `collection` and `query` (group:feature)");
    }
    k.collection = e["collection"].as<std::string>();
    k.query_name = e["query"].as<std::string>();
    auto ref = spec->Resolve(k.query_name);
    if (!ref.ok()) return ctx.Error(e["query"], where, ref.status().message());
    k.query = *ref;
    if (e["k"]) {
      if (!YAML::convert<int>::decode(e["k"], k.k) || k.k < 1 || k.k > 1000) {
        return ctx.Error(e["k"], where, "`k` must be an integer from 1 to 1000");
      }
    }
    if (e["min_score"]) {
      if (!YAML::convert<double>::decode(e["min_score"], k.min_score)) {
        return ctx.Error(e["min_score"], where, "`min_score` must be a number");
      }
      k.has_min_score = true;
    }
    for (const auto& other : spec->knn) {
      if (other.name == k.name) return ctx.Error(e, where, "declared twice");
    }
    if (spec->GroupIndex(k.name) >= 0) {
      return ctx.Error(e, where, "a feature group has the same name");
    }
    spec->knn.push_back(std::move(k));
  }
  return OkStatus();
}

// An input filled by a knn lookup's ids or scores.
Status ParseKnnInput(const Ctx& ctx, const YAML::Node& in, const std::string& where,
                     FeatureSpec* spec, InputMapping* m) {
  if (in["features"]) return ctx.Error(in, where, "give `features` or `knn`, not both");
  const std::string name = in["knn"].as<std::string>();
  for (size_t i = 0; i < spec->knn.size(); ++i) {
    if (spec->knn[i].name == name) m->knn = static_cast<int>(i);
  }
  if (m->knn < 0) return ctx.Error(in["knn"], where, fmt::format("no knn lookup \"{}\"", name));
  const std::string output = in["output"] ? in["output"].as<std::string>() : "";
  if (output != "ids" && output != "scores") {
    return ctx.Error(in, where, "`output` must be ids or scores");
  }
  m->knn_scores = output == "scores";
  m->elements = spec->knn[static_cast<size_t>(m->knn)].k;
  const GroupSpec& g = spec->groups[spec->knn[static_cast<size_t>(m->knn)].query.group];
  if (spec->entity.empty()) spec->entity = g.entity;
  if (g.entity != spec->entity) {
    return ctx.Error(in, where,
                     fmt::format("knn {} queries group {} keyed by {}, but the inputs use {}", name,
                                 g.name, g.entity, spec->entity));
  }
  return OkStatus();
}

Status ParseInputs(const Ctx& ctx, const YAML::Node& n, FeatureSpec* spec) {
  if (!n.IsSequence()) return ctx.Error(n, "inputs", "`inputs` must be a list");
  std::set<std::string> seen;
  for (const auto& in : n) {
    if (!in.IsMap() || !in["name"]) return ctx.Error(in, "inputs", "each input needs a `name`");
    InputMapping m;
    m.input = in["name"].as<std::string>();
    std::string where = fmt::format("input {}", m.input);
    if (!seen.insert(m.input).second) return ctx.Error(in, where, "input mapped twice");
    if (in["knn"]) {
      RETURN_IF_ERROR(ParseKnnInput(ctx, in, where, spec, &m));
      spec->inputs.push_back(std::move(m));
      continue;
    }
    const YAML::Node fs = in["features"];
    if (!fs || !fs.IsSequence() || fs.size() == 0) {
      return ctx.Error(in, where, "`features` must be a non-empty list of group:feature");
    }
    for (const auto& f : fs) {
      std::string name = f.as<std::string>();
      auto ref = spec->Resolve(name);
      if (!ref.ok()) return ctx.Error(f, where, ref.status().message());
      const GroupSpec& g = spec->groups[ref->group];
      if (spec->entity.empty()) spec->entity = g.entity;
      if (g.entity != spec->entity) {
        return ctx.Error(f, where,
                         fmt::format("group {} is keyed by {} but the inputs already use {}; "
                                     "one model's features must share one entity",
                                     g.name, g.entity, spec->entity));
      }
      m.elements += g.features[ref->feature].elements;
      m.names.push_back(std::move(name));
      m.refs.push_back(*ref);
    }
    spec->inputs.push_back(std::move(m));
  }
  return OkStatus();
}

Status ParseSpec(const Ctx& ctx, const YAML::Node& root, FeatureSpec* spec) {
  if (!root.IsMap()) return ctx.Error(root, "top level", "a features.yaml must be a mapping");
  static const std::set<std::string> kKnown = {"domain", "entities", "feature_groups",
                                               "knn",    "inputs",   "entity_input"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    if (!kKnown.count(key)) {
      return ctx.Error(kv.first, "top level",
                       fmt::format("unknown field \"{}\" (expected domain, entities, "
                                   "feature_groups, knn, inputs, entity_input)",
                                   key));
    }
  }
  if (const YAML::Node d = root["domain"]) {
    spec->domain = d.as<std::string>();
    if (!ValidName(spec->domain)) {
      return ctx.Error(d, "domain", "must be 1-128 characters of [A-Za-z0-9_.-]");
    }
  }
  const YAML::Node ents = root["entities"];
  if (!ents || !ents.IsSequence() || ents.size() == 0) {
    return ctx.Error(root, "entities", "`entities` must be a non-empty list");
  }
  for (const auto& e : ents) {
    if (!e.IsMap()) return ctx.Error(e, "entities", "each entity must be a mapping");
    EntitySpec es;
    ASSIGN_OR_RETURN(es.name, NameField(ctx, e, "entities"));
    std::string kt = e["key_type"] ? e["key_type"].as<std::string>() : "int64";
    if (kt == "int64" || kt == "INT64") {
      es.key_type = KeyType::kInt64;
    } else if (kt == "string" || kt == "STRING" || kt == "BYTES") {
      es.key_type = KeyType::kString;
    } else {
      return ctx.Error(e["key_type"], fmt::format("entity {}", es.name),
                       fmt::format("key_type \"{}\" must be int64 or string", kt));
    }
    if (spec->FindEntity(es.name)) {
      return ctx.Error(e, fmt::format("entity {}", es.name), "declared twice");
    }
    spec->entities.push_back(std::move(es));
  }
  const YAML::Node groups = root["feature_groups"];
  if (!groups || !groups.IsSequence() || groups.size() == 0) {
    return ctx.Error(root, "feature_groups", "`feature_groups` must be a non-empty list");
  }
  for (const auto& gn : groups) {
    GroupSpec g;
    RETURN_IF_ERROR(ParseGroup(ctx, gn, *spec, &g));
    if (spec->GroupIndex(g.name) >= 0) {
      return ctx.Error(gn, fmt::format("group {}", g.name), "declared twice");
    }
    spec->groups.push_back(std::move(g));
  }
  if (const YAML::Node k = root["knn"]) RETURN_IF_ERROR(ParseKnn(ctx, k, spec));
  if (const YAML::Node in = root["inputs"]) RETURN_IF_ERROR(ParseInputs(ctx, in, spec));
  if (const YAML::Node ei = root["entity_input"]) {
    spec->entity_input = ei.as<std::string>();
    if (spec->inputs.empty()) {
      return ctx.Error(ei, "entity_input", "needs `inputs` (which features fill which input)");
    }
  }
  return OkStatus();
}

}  // namespace

int GroupSpec::FeatureIndex(std::string_view n) const {
  for (size_t i = 0; i < features.size(); ++i) {
    if (features[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

const EntitySpec* FeatureSpec::FindEntity(std::string_view n) const {
  for (const auto& e : entities) {
    if (e.name == n) return &e;
  }
  return nullptr;
}

int FeatureSpec::GroupIndex(std::string_view n) const {
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<FeatureRef> FeatureSpec::Resolve(std::string_view reference) const {
  size_t colon = reference.find(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument(
        fmt::format("feature reference \"{}\" must be group:feature", reference));
  }
  std::string_view group = reference.substr(0, colon), feature = reference.substr(colon + 1);
  int g = GroupIndex(group);
  if (g < 0) {
    return InvalidArgument(
        fmt::format("feature reference \"{}\": no feature group \"{}\"", reference, group));
  }
  int f = groups[static_cast<size_t>(g)].FeatureIndex(feature);
  if (f < 0) {
    return InvalidArgument(fmt::format("feature reference \"{}\": group {} has no feature \"{}\"",
                                       reference, group, feature));
  }
  return FeatureRef{static_cast<size_t>(g), static_cast<size_t>(f)};
}

std::string FeatureSpec::RefName(const FeatureRef& ref) const {
  return groups[ref.group].name + ":" + groups[ref.group].features[ref.feature].name;
}

StatusOr<FeatureSpecPtr> ParseFeatureSpec(std::string_view text, const std::string& source) {
  auto spec = std::make_shared<FeatureSpec>();
  spec->source = source;
  Ctx ctx(source);
  try {
    YAML::Node root = YAML::Load(std::string(text));
    RETURN_IF_ERROR(ParseSpec(ctx, root, spec.get()));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}:{}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  return FeatureSpecPtr(std::move(spec));
}

StatusOr<FeatureSpecPtr> LoadFeatureSpecFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot read feature spec {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseFeatureSpec(ss.str(), path);
}

bool SameLayout(const FeatureSpec* a, const FeatureSpec* b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr) return false;
  if (a->domain != b->domain || a->entity_input != b->entity_input ||
      a->inputs.size() != b->inputs.size()) {
    return false;
  }
  for (size_t i = 0; i < a->inputs.size(); ++i) {
    const InputMapping& x = a->inputs[i];
    const InputMapping& y = b->inputs[i];
    if (x.input != y.input || x.elements != y.elements || x.refs.size() != y.refs.size() ||
        x.knn != y.knn || x.knn_scores != y.knn_scores) {
      return false;
    }
    if (x.knn >= 0) {
      const KnnSpec& kx = a->knn[static_cast<size_t>(x.knn)];
      const KnnSpec& ky = b->knn[static_cast<size_t>(y.knn)];
      if (kx.name != ky.name || kx.collection != ky.collection || kx.query_name != ky.query_name ||
          kx.k != ky.k || kx.has_min_score != ky.has_min_score || kx.min_score != ky.min_score) {
        return false;
      }
    }
    for (size_t k = 0; k < x.refs.size(); ++k) {
      const GroupSpec& gx = a->groups[x.refs[k].group];
      const GroupSpec& gy = b->groups[y.refs[k].group];
      const FeatureDef& fx = gx.features[x.refs[k].feature];
      const FeatureDef& fy = gy.features[y.refs[k].feature];
      if (gx.name != gy.name || gx.version != gy.version || fx.name != fy.name ||
          fx.dtype != fy.dtype || fx.shape != fy.shape) {
        return false;
      }
    }
  }
  return true;
}

StatusOr<std::string> CanonicalEntityId(KeyType type, std::string_view id) {
  if (type == KeyType::kInt64) {
    int64_t v;
    auto [p, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
    if (id.empty() || ec != std::errc() || p != id.data() + id.size()) {
      return InvalidArgument(fmt::format("entity id \"{}\" is not an int64", id));
    }
    return std::to_string(v);
  }
  if (id.empty() || id.size() > 1024) {
    return InvalidArgument("a string entity id must be 1 to 1024 bytes");
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgument("a string entity id must not contain control characters");
    }
  }
  return std::string(id);
}

}  // namespace dais::features
