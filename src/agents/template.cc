#include "agents/template.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace dais::agents {
namespace {

using rapidjson::Value;

bool ParseNumber(std::string_view s, double* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && std::isfinite(*out);
}

constexpr std::string_view kCasts[] = {"int", "number", "string", "bool"};

// `v` converted by `cast` ("" keeps it); `what` names the reference in errors.
Status Convert(const Value& v, std::string_view cast, const std::string& what, Value* out,
               rapidjson::Document::AllocatorType& alloc) {
  double d = 0;
  if (cast.empty()) {
    out->CopyFrom(v, alloc);
  } else if (cast == "string") {
    const std::string text = ValueText(v);
    out->SetString(text.data(), static_cast<rapidjson::SizeType>(text.size()), alloc);
  } else if (cast == "bool") {
    const std::string text = ValueText(v);
    if (text != "true" && text != "false" && text != "1" && text != "0") {
      return InvalidArgument(what + ": '" + text + "' is not true, false, 1 or 0");
    }
    out->SetBool(text == "true" || text == "1");
  } else if (!AsNumber(v, &d)) {
    return InvalidArgument(what + ": '" + ValueText(v) + "' is not a number");
  } else if (cast == "int") {
    if (d != std::trunc(d) || std::fabs(d) > 9.007199254740992e15) {
      return InvalidArgument(what + ": '" + ValueText(v) + "' is not an integer");
    }
    out->SetInt64(static_cast<int64_t>(d));
  } else if (d == std::trunc(d) && std::fabs(d) <= 9.007199254740992e15) {
    out->SetInt64(static_cast<int64_t>(d));  // number: 3 stays 3
  } else {
    out->SetDouble(d);
  }
  return OkStatus();
}

// "path|cast" -> path, cast.
std::pair<std::string_view, std::string_view> SplitCast(std::string_view ref) {
  const size_t bar = ref.rfind('|');
  if (bar == std::string_view::npos) return {ref, {}};
  return {ref.substr(0, bar), ref.substr(bar + 1)};
}

}  // namespace

std::string ValueJson(const Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

std::string ValueText(const Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : ValueJson(v);
}

bool AsNumber(const Value& v, double* out) {
  if (v.IsNumber()) {
    *out = v.GetDouble();
    return true;
  }
  if (v.IsBool()) {
    *out = v.GetBool() ? 1 : 0;
    return true;
  }
  return v.IsString() && ParseNumber(std::string_view(v.GetString(), v.GetStringLength()), out);
}

RunContext::RunContext() { doc_.SetObject(); }

void RunContext::SetEvent(const std::vector<std::pair<std::string, std::string>>& fields) {
  Value event(rapidjson::kObjectType);
  for (const auto& [k, v] : fields) {
    Value key(k.data(), static_cast<rapidjson::SizeType>(k.size()), allocator());
    Value val(v.data(), static_cast<rapidjson::SizeType>(v.size()), allocator());
    event.AddMember(key, val, allocator());
  }
  Set("event", std::move(event));
}

void RunContext::SetEventJson(const Value& event) {
  Value copy;
  copy.CopyFrom(event, allocator());
  Set("event", std::move(copy));
}

void RunContext::SetRun(const std::string& agent, const std::string& run_id, int attempt) {
  Value run(rapidjson::kObjectType);
  run.AddMember("id", Value(run_id.c_str(), allocator()), allocator());
  run.AddMember("agent", Value(agent.c_str(), allocator()), allocator());
  run.AddMember("attempt", attempt, allocator());
  Set("run", std::move(run));
}

void RunContext::Set(const std::string& name, Value value) {
  if (doc_.HasMember(name.c_str())) {
    doc_[name.c_str()] = std::move(value);
    return;
  }
  doc_.AddMember(Value(name.c_str(), allocator()), value, allocator());
}

const Value* RunContext::Find(std::string_view path) const {
  const Value* at = &doc_;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    if (at->IsObject()) {
      auto it = at->FindMember(
          Value(rapidjson::StringRef(part.data(), static_cast<rapidjson::SizeType>(part.size()))));
      if (it == at->MemberEnd()) return nullptr;
      at = &it->value;
    } else if (at->IsArray()) {
      size_t index = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec != std::errc() || p != part.data() + part.size() || index >= at->Size()) {
        return nullptr;
      }
      at = &(*at)[static_cast<rapidjson::SizeType>(index)];
    } else {
      return nullptr;
    }
  }
  return at;
}

StatusOr<std::vector<std::string>> References(std::string_view text) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = text.find("${", at)) != std::string_view::npos) {
    const size_t end = text.find('}', at + 2);
    if (end == std::string_view::npos) {
      return InvalidArgument("'" + std::string(text) + "': a reference ${ without its }");
    }
    if (end == at + 2) return InvalidArgument("'" + std::string(text) + "': an empty ${}");
    const auto [path, cast] = SplitCast(text.substr(at + 2, end - at - 2));
    if (text.substr(at + 2, end - at - 2).find('|') != std::string_view::npos &&
        std::find(std::begin(kCasts), std::end(kCasts), cast) == std::end(kCasts)) {
      return InvalidArgument("'" + std::string(text) + "': '|" + std::string(cast) +
                             "' is not a conversion (|int, |number, |string, |bool)");
    }
    if (path.empty()) return InvalidArgument("'" + std::string(text) + "': an empty ${}");
    out.emplace_back(path);
    at = end + 1;
  }
  return out;
}

Status RunContext::RenderString(std::string_view text, Value* out) const {
  auto& alloc = const_cast<rapidjson::Document&>(doc_).GetAllocator();
  if (text.size() > 3 && text.substr(0, 2) == "${" && text.find('}') == text.size() - 1) {
    const std::string_view ref = text.substr(2, text.size() - 3);
    const auto [path, cast] = SplitCast(ref);
    const Value* v = Find(path);
    if (v == nullptr) return NotFound("${" + std::string(path) + "} refers to nothing");
    return Convert(*v, cast, "${" + std::string(ref) + "}", out, alloc);
  }
  std::string rendered;
  size_t at = 0;
  while (true) {
    const size_t open = text.find("${", at);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open + 2);
    if (close == std::string_view::npos) break;  // validated at apply: kept as text
    rendered.append(text.substr(at, open - at));
    const std::string_view ref = text.substr(open + 2, close - open - 2);
    const auto [path, cast] = SplitCast(ref);
    const Value* v = Find(path);
    if (v == nullptr) return NotFound("${" + std::string(path) + "} refers to nothing");
    Value converted;
    RETURN_IF_ERROR(Convert(*v, cast, "${" + std::string(ref) + "}", &converted, alloc));
    rendered += ValueText(converted);
    at = close + 1;
  }
  rendered.append(text.substr(at));
  out->SetString(rendered.data(), static_cast<rapidjson::SizeType>(rendered.size()), alloc);
  return OkStatus();
}

Status RunContext::Render(const Value& body, Value* out) const {
  auto& alloc = const_cast<rapidjson::Document&>(doc_).GetAllocator();
  if (body.IsString()) {
    return RenderString(std::string_view(body.GetString(), body.GetStringLength()), out);
  }
  if (body.IsArray()) {
    out->SetArray();
    for (const Value& item : body.GetArray()) {
      Value v;
      RETURN_IF_ERROR(Render(item, &v));
      out->PushBack(v, alloc);
    }
    return OkStatus();
  }
  if (body.IsObject()) {
    out->SetObject();
    for (const auto& m : body.GetObject()) {
      Value v;
      RETURN_IF_ERROR(Render(m.value, &v));
      out->AddMember(Value(m.name, alloc), v, alloc);
    }
    return OkStatus();
  }
  out->CopyFrom(body, alloc);
  return OkStatus();
}

std::string RunContext::ToJson() const { return ValueJson(doc_); }

StatusOr<bool> EvaluateCondition(std::string_view condition, const RunContext& context) {
  static constexpr std::string_view kOps[] = {"==", "!=", "<=", ">=", "<", ">"};
  // The operator: the first one outside a reference.
  size_t op_at = std::string_view::npos;
  std::string_view op;
  int depth = 0;
  for (size_t i = 0; i < condition.size() && op_at == std::string_view::npos; ++i) {
    if (condition.substr(i, 2) == "${") depth = 1;
    if (condition[i] == '}') depth = 0;
    if (depth) continue;
    for (std::string_view o : kOps) {
      if (condition.substr(i, o.size()) == o) {
        op_at = i;
        op = o;
        break;
      }
    }
  }
  auto operand = [&](std::string_view s, Value* out) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    Value text(rapidjson::StringRef(s.data(), static_cast<rapidjson::SizeType>(s.size())));
    return context.Render(text, out);
  };
  if (op_at == std::string_view::npos) {
    Value v;
    RETURN_IF_ERROR(operand(condition, &v));
    double d = 0;
    if (AsNumber(v, &d)) return d != 0;
    if (v.IsString()) return v.GetStringLength() > 0 && std::string_view(v.GetString()) != "false";
    if (v.IsArray()) return !v.Empty();
    return v.IsObject();
  }
  Value left, right;
  RETURN_IF_ERROR(operand(condition.substr(0, op_at), &left));
  RETURN_IF_ERROR(operand(condition.substr(op_at + op.size()), &right));
  double a = 0, b = 0;
  if (AsNumber(left, &a) && AsNumber(right, &b)) {
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    return a >= b;
  }
  if (op != "==" && op != "!=") {
    return InvalidArgument("'" + std::string(condition) + "': " + std::string(op) +
                           " compares numbers; got '" + ValueText(left) + "' and '" +
                           ValueText(right) + "'");
  }
  const bool equal = ValueText(left) == ValueText(right);
  return op == "==" ? equal : !equal;
}

}  // namespace dais::agents
