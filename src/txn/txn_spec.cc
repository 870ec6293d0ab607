#include "txn/txn_spec.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

#include "cluster/spec_yaml.h"
#include "common/json.h"

namespace dais::txn {

using cluster::Get;
using cluster::Unknown;

namespace {

bool IdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

StatusOr<ParamType> ParseType(const std::string& t, const std::string& at) {
  if (t == "string") return ParamType::kString;
  if (t == "int") return ParamType::kInt;
  if (t == "number") return ParamType::kNumber;
  if (t == "bool") return ParamType::kBool;
  return InvalidArgument(at + ": unknown parameter type '" + t +
                         "' (known: string, int, number, bool)");
}

bool Declared(const TypeSpec& t, const std::string& name) {
  for (const auto& [n, _] : t.params) {
    if (n == name) return true;
  }
  return false;
}

// "$name" -> a parameter reference (which must be declared); anything else a literal.
StatusOr<ValueRef> ParseRef(const TypeSpec& t, const std::string& text, const std::string& at) {
  if (!text.empty() && text[0] == '$') {
    std::string name = text.substr(1);
    if (!Declared(t, name)) return InvalidArgument(at + ": unknown parameter $" + name);
    return ValueRef{name, ""};
  }
  return ValueRef{"", text};
}

// Rewrites $name placeholders to $1, $2, ... (one number per distinct name).
Status RewriteSql(const TypeSpec& t, const std::string& at, StatementSpec* s) {
  std::string out;
  const std::string& in = s->sql;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '$' || i + 1 >= in.size() || !IdentStart(in[i + 1])) {
      if (in[i] == '$' && i + 1 < in.size() &&
          std::isdigit(static_cast<unsigned char>(in[i + 1]))) {
        return InvalidArgument(at + ": positional $" + std::string(1, in[i + 1]) +
                               ": use the parameter's name ($name)");
      }
      out += in[i];
      continue;
    }
    size_t j = i + 1;
    while (j < in.size() && IdentChar(in[j])) ++j;
    std::string name = in.substr(i + 1, j - i - 1);
    if (!Declared(t, name)) return InvalidArgument(at + ": unknown parameter $" + name);
    size_t k = 0;
    while (k < s->params.size() && s->params[k] != name) ++k;
    if (k == s->params.size()) s->params.push_back(name);
    out += "$" + std::to_string(k + 1);
    i = j - 1;
  }
  s->sql = std::move(out);
  return OkStatus();
}

Status ParseBranch(const YAML::Node& b, const std::string& at, const TxnSpec& spec, TypeSpec* t) {
  if (!b.IsMap()) return InvalidArgument(at + ": expected a mapping");
  RETURN_IF_ERROR(Unknown(b, {"participant", "statements", "events"}, at + "."));
  BranchSpec branch;
  RETURN_IF_ERROR(Get(b, "participant", at + ".", &branch.participant));
  if (!spec.participants.count(branch.participant)) {
    return InvalidArgument(at + ".participant: unknown participant '" + branch.participant + "'");
  }
  const YAML::Node st = b["statements"];
  if (!st || !st.IsSequence() || st.size() == 0) {
    return InvalidArgument(at + ".statements: expected a list of statements");
  }
  for (size_t i = 0; i < st.size(); ++i) {
    std::string sat = at + ".statements[" + std::to_string(i) + "]";
    StatementSpec s;
    if (st[i].IsScalar()) {
      s.sql = st[i].as<std::string>();
    } else {
      RETURN_IF_ERROR(Unknown(st[i], {"sql", "expect_rows", "error"}, sat + "."));
      RETURN_IF_ERROR(Get(st[i], "sql", sat + ".", &s.sql));
      RETURN_IF_ERROR(Get(st[i], "expect_rows", sat + ".", &s.expect_rows));
      RETURN_IF_ERROR(Get(st[i], "error", sat + ".", &s.error));
    }
    if (s.sql.empty()) return InvalidArgument(sat + ".sql: missing");
    if (s.error.empty()) s.error = "statement " + std::to_string(i + 1) + " matched no row";
    RETURN_IF_ERROR(RewriteSql(*t, sat, &s));
    branch.statements.push_back(std::move(s));
  }
  if (const YAML::Node ev = b["events"]; ev && !ev.IsNull()) {
    // Issue 32: `events: "oops"` (a scalar iterates as nothing) was accepted and emitted nothing.
    if (!ev.IsSequence()) return InvalidArgument(at + ".events: expected a list of events");
    for (size_t i = 0; i < ev.size(); ++i) {
      std::string eat = at + ".events[" + std::to_string(i) + "]";
      if (!ev[i].IsMap()) return InvalidArgument(eat + ": expected a mapping {stream, fields}");
      RETURN_IF_ERROR(Unknown(ev[i], {"stream", "fields"}, eat + "."));
      EventSpec e;
      RETURN_IF_ERROR(Get(ev[i], "stream", eat + ".", &e.stream));
      if (e.stream.empty()) return InvalidArgument(eat + ".stream: missing");
      const YAML::Node fields = ev[i]["fields"];
      if (!fields || !fields.IsMap() || fields.size() == 0) {
        return InvalidArgument(eat + ".fields: expected a mapping {name: $param or literal}");
      }
      for (const auto& kv : fields) {
        std::string key = kv.first.as<std::string>();
        if (!kv.second.IsScalar()) {
          return InvalidArgument(eat + ".fields." + key + ": expected a $param or a literal");
        }
        ASSIGN_OR_RETURN(ValueRef ref, ParseRef(*t, kv.second.as<std::string>(), eat + "." + key));
        e.fields.emplace_back(key, std::move(ref));
      }
      branch.events.push_back(std::move(e));
    }
  }
  t->branches.push_back(std::move(branch));
  return OkStatus();
}

Status ParseGate(const YAML::Node& g, const std::string& at, TypeSpec* t) {
  RETURN_IF_ERROR(Unknown(g,
                          {"model", "version", "input", "vector", "entity", "output",
                           "output_index", "threshold", "timeout_ms", "on_error"},
                          at + "."));
  GateSpec gate;
  RETURN_IF_ERROR(Get(g, "model", at + ".", &gate.model));
  if (gate.model.empty()) return InvalidArgument(at + ".model: missing");
  RETURN_IF_ERROR(Get(g, "version", at + ".", &gate.version));
  RETURN_IF_ERROR(Get(g, "input", at + ".", &gate.input));
  RETURN_IF_ERROR(Get(g, "output", at + ".", &gate.output));
  RETURN_IF_ERROR(Get(g, "output_index", at + ".", &gate.output_index));
  RETURN_IF_ERROR(Get(g, "threshold", at + ".", &gate.threshold));
  RETURN_IF_ERROR(Get(g, "timeout_ms", at + ".", &gate.timeout_ms));
  if (gate.timeout_ms <= 0) return InvalidArgument(at + ".timeout_ms: must be > 0");
  std::string policy = "refuse";
  RETURN_IF_ERROR(Get(g, "on_error", at + ".", &policy));
  if (policy == "allow") {
    gate.on_error = GatePolicy::kAllow;
  } else if (policy != "refuse") {
    return InvalidArgument(at + ".on_error: expected refuse or allow, got '" + policy + "'");
  }
  if (const YAML::Node e = g["entity"]; e) {
    if (!e.IsMap() || e.size() != 1) {
      return InvalidArgument(at + ".entity: expected {entity_name: $param}");
    }
    gate.entity = e.begin()->first.as<std::string>();
    ASSIGN_OR_RETURN(ValueRef ref,
                     ParseRef(*t, e.begin()->second.as<std::string>(), at + ".entity"));
    if (ref.param.empty()) return InvalidArgument(at + ".entity: the id must be a $parameter");
    gate.entity_param = ref.param;
  }
  const YAML::Node v = g["vector"];
  if (!v || !v.IsSequence() || v.size() == 0) {
    return InvalidArgument(at + ".vector: expected a list ($param, group:feature or a number)");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    std::string text = v[i].as<std::string>();
    std::string eat = at + ".vector[" + std::to_string(i) + "]";
    GateElement el;
    if (!text.empty() && text[0] == '$') {
      ASSIGN_OR_RETURN(ValueRef ref, ParseRef(*t, text, eat));
      el.param = ref.param;
    } else if (text.find(':') != std::string::npos) {
      if (gate.entity.empty()) return InvalidArgument(eat + ": a feature needs gate.entity");
      el.feature = text;
    } else {
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), el.constant);
      if (ec != std::errc() || p != text.data() + text.size()) {
        return InvalidArgument(eat + ": '" + text + "' is not a $param, group:feature or number");
      }
    }
    gate.vector.push_back(std::move(el));
  }
  t->gate = std::move(gate);
  return OkStatus();
}

Status ParseType(const YAML::Node& node, const std::string& name, const TxnSpec& spec,
                 TypeSpec* t) {
  const std::string at = "types." + name;
  if (!node.IsMap()) return InvalidArgument(at + ": expected a mapping");
  RETURN_IF_ERROR(Unknown(node, {"params", "branches", "gate"}, at + "."));
  t->name = name;
  const YAML::Node params = node["params"];
  if (params && !params.IsNull() && !params.IsMap()) {
    return InvalidArgument(at + ".params: expected a mapping {name: type}");
  }
  for (const auto& kv : params) {
    std::string p = kv.first.as<std::string>();
    if (p.empty() || !IdentStart(p[0])) return InvalidArgument(at + ".params." + p + ": bad name");
    if (!kv.second.IsScalar()) {
      return InvalidArgument(at + ".params." + p + ": expected a type (string, int, number, bool)");
    }
    ASSIGN_OR_RETURN(ParamType pt, ParseType(kv.second.as<std::string>(), at + ".params." + p));
    t->params.emplace_back(p, pt);
  }
  const YAML::Node br = node["branches"];
  if (!br || !br.IsSequence() || br.size() == 0) {
    return InvalidArgument(at + ".branches: expected at least one branch");
  }
  for (size_t i = 0; i < br.size(); ++i) {
    RETURN_IF_ERROR(ParseBranch(br[i], at + ".branches[" + std::to_string(i) + "]", spec, t));
  }
  if (const YAML::Node g = node["gate"]; g) RETURN_IF_ERROR(ParseGate(g, at + ".gate", t));
  return OkStatus();
}

}  // namespace

std::string_view ParamTypeName(ParamType t) {
  switch (t) {
    case ParamType::kString:
      return "string";
    case ParamType::kInt:
      return "int";
    case ParamType::kNumber:
      return "number";
    case ParamType::kBool:
      return "bool";
  }
  return "?";
}

bool GateSpec::uses_features() const {
  for (const GateElement& e : vector) {
    if (!e.feature.empty()) return true;
  }
  return false;
}

const TypeSpec* TxnSpec::Find(std::string_view name) const {
  auto it = types.find(std::string(name));
  return it == types.end() ? nullptr : &it->second;
}

StatusOr<TxnSpecPtr> ParseTxnSpec(std::string_view yaml, const std::string& source) {
  auto spec = std::make_shared<TxnSpec>();
  spec->source = source;
  auto parse = [&]() -> Status {
    ASSIGN_OR_RETURN(const YAML::Node root,
                     cluster::LoadYamlMap(std::string(yaml), "transactions file"));
    RETURN_IF_ERROR(Unknown(root, {"participants", "log", "prepare_timeout_ms", "types"}, ""));
    for (const auto& kv : root["participants"]) {
      spec->participants[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    if (spec->participants.empty()) return InvalidArgument("participants: none declared");
    RETURN_IF_ERROR(Get(root, "log", "", &spec->log));
    if (spec->log.empty()) return InvalidArgument("log: missing (the decision log's database)");
    RETURN_IF_ERROR(Get(root, "prepare_timeout_ms", "", &spec->prepare_timeout_ms));
    if (spec->prepare_timeout_ms <= 0) return InvalidArgument("prepare_timeout_ms: must be > 0");
    for (const auto& kv : root["types"]) {
      std::string name = kv.first.as<std::string>();
      RETURN_IF_ERROR(ParseType(kv.second, name, *spec, &spec->types[name]));
    }
    if (spec->types.empty()) return InvalidArgument("types: none declared");
    return OkStatus();
  };
  Status st;
  try {
    st = parse();
  } catch (const YAML::Exception& e) {
    // A value of the wrong shape (a list where a string belongs, ...), with YAML's line.
    st = InvalidArgument(std::string("malformed: ") + e.what());
  }
  if (!st.ok()) return InvalidArgument(source + ": " + st.message());
  return TxnSpecPtr(std::move(spec));
}

StatusOr<TxnSpecPtr> LoadTxnSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTxnSpec(ss.str(), path);
}

StatusOr<Params> ParseParams(const TypeSpec& type, std::string_view body) {
  rapidjson::Document doc;
  if (Status st = json::ParseJson(body, &doc); !st.ok()) {
    return InvalidArgument("body: " + st.message());
  }
  if (!doc.IsObject()) return InvalidArgument("body: expected a JSON object of parameters");
  Params out;
  for (const auto& m : std::as_const(doc).GetObject()) {
    std::string name(m.name.GetString(), m.name.GetStringLength());
    const ParamType* pt = nullptr;
    for (const auto& [n, t] : type.params) {
      if (n == name) pt = &t;
    }
    if (!pt) return InvalidArgument("'" + name + "': not a parameter of " + type.name);
    const rapidjson::Value& v = m.value;
    std::string text;
    bool ok = true;
    switch (*pt) {
      case ParamType::kString:
        ok = v.IsString() && std::string_view(v.GetString(), v.GetStringLength()).find('\0') ==
                                 std::string_view::npos;
        if (ok) text.assign(v.GetString(), v.GetStringLength());
        break;
      case ParamType::kInt:
        ok = v.IsInt64();
        if (ok) text = std::to_string(v.GetInt64());
        break;
      case ParamType::kNumber: {
        ok = v.IsNumber();
        if (ok) {
          char buf[32];
          auto r = std::to_chars(buf, buf + sizeof(buf), v.GetDouble());
          text.assign(buf, r.ptr);
        }
        break;
      }
      case ParamType::kBool:
        ok = v.IsBool();
        if (ok) text = v.GetBool() ? "true" : "false";
        break;
    }
    if (!ok) {
      return InvalidArgument("'" + name + "': expected " + std::string(ParamTypeName(*pt)));
    }
    out[name] = std::move(text);
  }
  for (const auto& [n, t] : type.params) {
    if (!out.count(n)) {
      return InvalidArgument("'" + n + "': missing (" + std::string(ParamTypeName(t)) + ")");
    }
  }
  return out;
}

std::string Resolve(const ValueRef& ref, const Params& params) {
  if (ref.param.empty()) return ref.literal;
  auto it = params.find(ref.param);
  return it == params.end() ? std::string() : it->second;
}

}  // namespace dais::txn
