#include "agents/run.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <functional>

#include "agents/template.h"
#include "common/json.h"

namespace dais::agents {
namespace {

using rapidjson::Value;

bool IsInteger(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Numbers from rendered data: nested lists flattened, strings read as numbers (event fields are
// strings). `what` names the tensor in errors.
Status Numbers(const Value& v, const std::string& what, Value* out,
               rapidjson::Document::AllocatorType& alloc) {
  if (v.IsArray()) {
    for (const Value& item : v.GetArray()) RETURN_IF_ERROR(Numbers(item, what, out, alloc));
    return OkStatus();
  }
  double d = 0;
  if (!AsNumber(v, &d)) {
    return InvalidArgument(what + ": '" + ValueText(v) + "' is not a number");
  }
  int64_t i = 0;
  if (v.IsInt64()) {
    out->PushBack(Value(v.GetInt64()), alloc);
  } else if (v.IsString() && IsInteger(std::string_view(v.GetString(), v.GetStringLength()), &i)) {
    out->PushBack(Value(i), alloc);
  } else {
    out->PushBack(Value(d), alloc);
  }
  return OkStatus();
}

Status Parse(const std::string& answer, const char* what, rapidjson::Document* doc) {
  if (Status s = json::ParseJson(answer, doc); !s.ok()) {
    return Internal(std::string(what) + " answered what is not JSON: " + s.message());
  }
  return OkStatus();
}

// Each step kind: renders the request from `body`, makes the call, shapes the answer into the
// step's result (allocated in the context).
class StepRunner {
 public:
  StepRunner(const AgentSpec& agent, const std::string& run_id, RunContext& ctx, Actions& actions,
             Deadline deadline)
      : agent_(agent), run_id_(run_id), ctx_(ctx), actions_(actions), deadline_(deadline) {}

  // The step's result, or an error; *stop when a branch ended the run; *duplicate for an emit
  // made before.
  Status Run(const StepSpec& step, bool* stop, bool* duplicate) {
    rapidjson::Document body;
    RETURN_IF_ERROR(json::ParseJson(step.body, &body));
    Value rendered;
    if (step.kind != StepKind::kBranch) RETURN_IF_ERROR(ctx_.Render(body, &rendered));
    Value result(rapidjson::kObjectType);
    switch (step.kind) {
      case StepKind::kFeatures:
        RETURN_IF_ERROR(RunFeatures(rendered, &result));
        break;
      case StepKind::kInfer:
        RETURN_IF_ERROR(RunInfer(step, rendered, &result));
        break;
      case StepKind::kMemorySearch:
      case StepKind::kMemoryUpsert:
        RETURN_IF_ERROR(RunMemory(step, rendered, &result));
        break;
      case StepKind::kEmit:
        RETURN_IF_ERROR(RunEmit(step, rendered, &result, duplicate));
        break;
      case StepKind::kTxn:
        RETURN_IF_ERROR(RunTxn(step, rendered, &result));
        break;
      case StepKind::kBranch: {
        ASSIGN_OR_RETURN(bool go, EvaluateCondition(body["if"].GetString(), ctx_));
        result.AddMember("value", go, alloc());
        *stop = !go;
        break;
      }
    }
    ctx_.Set(step.name, std::move(result));
    return OkStatus();
  }

 private:
  rapidjson::Document::AllocatorType& alloc() { return ctx_.allocator(); }

  Status RunFeatures(Value& b, Value* result) {
    Value request(rapidjson::kObjectType);
    request.AddMember("features", b["features"], alloc());
    Value entities(rapidjson::kObjectType);
    const Value& given = b["entities"];
    for (const auto& m : given.GetObject()) {
      Value ids(rapidjson::kArrayType);
      if (m.value.IsArray()) {
        ids.CopyFrom(m.value, alloc());
      } else {
        ids.PushBack(Value(m.value, alloc()), alloc());
      }
      entities.AddMember(Value(m.name, alloc()), ids, alloc());
    }
    const size_t entity_columns = entities.MemberCount();
    request.AddMember("entities", entities, alloc());
    ASSIGN_OR_RETURN(std::string answer, actions_.Features(ValueJson(request), deadline_));
    rapidjson::Document doc;
    RETURN_IF_ERROR(Parse(answer, "the feature server", &doc));
    if (!doc.IsObject() || !doc.HasMember("metadata") || !doc["metadata"].IsObject() ||
        !doc["metadata"].HasMember("feature_names") ||
        !doc["metadata"]["feature_names"].IsArray() || !doc.HasMember("results") ||
        !doc["results"].IsArray()) {
      return Internal("the feature server's answer has no metadata.feature_names / results");
    }
    const Value& names = doc["metadata"]["feature_names"];
    const Value& results = doc["results"];
    for (rapidjson::SizeType i = entity_columns; i < names.Size() && i < results.Size(); ++i) {
      if (!names[i].IsString() || !results[i].IsObject() || !results[i].HasMember("values")) {
        return Internal("the feature server's answer has a column without a name or values");
      }
      const Value& values = results[i]["values"];
      Value v;
      if (values.IsArray() && values.Size() == 1) {
        v.CopyFrom(values[0], alloc());
      } else {
        v.CopyFrom(values, alloc());
      }
      result->AddMember(Value(names[i], alloc()), v, alloc());
    }
    return OkStatus();
  }

  Status RunInfer(const StepSpec& step, Value& b, Value* result) {
    Value request(rapidjson::kObjectType);
    request.AddMember("id", Value(run_id_.c_str(), alloc()), alloc());
    Value inputs(rapidjson::kArrayType);
    for (auto& in : b["inputs"].GetArray()) {
      const std::string name = in["name"].IsString() ? in["name"].GetString() : "?";
      if (!in["datatype"].IsString()) return InvalidArgument("input " + name + ": datatype");
      if (std::string_view(in["datatype"].GetString()) != "BYTES") {
        Value data(rapidjson::kArrayType);
        RETURN_IF_ERROR(Numbers(in["data"], "input " + name, &data, alloc()));
        in["data"] = std::move(data);
      }
      inputs.PushBack(in, alloc());
    }
    request.AddMember("inputs", inputs, alloc());
    for (const char* key : {"outputs", "parameters"}) {
      if (b.HasMember(key)) request.AddMember(Value(key, alloc()), b[key], alloc());
    }
    ASSIGN_OR_RETURN(std::string answer, actions_.Infer(step.route, ValueJson(request), deadline_));
    rapidjson::Document doc;
    RETURN_IF_ERROR(Parse(answer, "the gateway", &doc));
    if (!doc.IsObject() || !doc.HasMember("outputs") || !doc["outputs"].IsArray()) {
      return Internal("the answer of route " + step.route + " has no outputs");
    }
    for (const Value& out : doc["outputs"].GetArray()) {
      if (!out.IsObject() || !out.HasMember("name") || !out["name"].IsString() ||
          !out.HasMember("data")) {
        continue;  // (binary outputs carry no data: not referencable)
      }
      Value data;
      data.CopyFrom(out["data"], alloc());
      result->AddMember(Value(out["name"], alloc()), data, alloc());
    }
    return OkStatus();
  }

  Status RunMemory(const StepSpec& step, Value& b, Value* result) {
    b.EraseMember("collection");  // (keeps the order of the others)
    const bool search = step.kind == StepKind::kMemorySearch;
    if (search) {
      Value vector(rapidjson::kArrayType);
      RETURN_IF_ERROR(Numbers(b["vector"], "vector", &vector, alloc()));
      b["vector"] = std::move(vector);
    }
    ASSIGN_OR_RETURN(
        std::string answer,
        actions_.Memory(step.collection, search ? "search" : "upsert", ValueJson(b), deadline_));
    rapidjson::Document doc;
    RETURN_IF_ERROR(Parse(answer, "the memory service", &doc));
    if (!search) {
      result->CopyFrom(doc, alloc());
      return OkStatus();
    }
    if (!doc.IsObject() || !doc.HasMember("results") || !doc["results"].IsArray()) {
      return Internal("the search of " + step.collection + " answered no results");
    }
    Value ids(rapidjson::kArrayType), scores(rapidjson::kArrayType), hits;
    for (const Value& hit : doc["results"].GetArray()) {
      if (!hit.IsObject()) continue;
      if (hit.HasMember("id")) ids.PushBack(Value(hit["id"], alloc()), alloc());
      if (hit.HasMember("score")) scores.PushBack(Value(hit["score"], alloc()), alloc());
    }
    hits.CopyFrom(doc["results"], alloc());
    result->AddMember("ids", ids, alloc());
    result->AddMember("scores", scores, alloc());
    result->AddMember("results", hits, alloc());
    return OkStatus();
  }

  Status RunEmit(const StepSpec& step, Value& b, Value* result, bool* duplicate) {
    Fields fields;
    const Value& given = b["fields"];
    for (const auto& m : given.GetObject()) {
      fields.emplace_back(m.name.GetString(), ValueText(m.value));
    }
    const std::string event_id = agent_.name + ":" + run_id_ + ":" + step.name;
    ASSIGN_OR_RETURN(std::string id, actions_.Emit(step.stream, event_id, fields, deadline_));
    *duplicate = id.empty();
    result->AddMember("id", Value(id.c_str(), alloc()), alloc());
    result->AddMember("duplicate", *duplicate, alloc());
    return OkStatus();
  }

  // The result is the decision ({txn_id, outcome, reason, ...}): a refusal is an outcome the
  // next steps can branch on (${hold.outcome} == committed), not a failed run.
  Status RunTxn(const StepSpec& step, Value& b, Value* result) {
    const std::string key = agent_.name + ":" + run_id_ + ":" + step.name;
    ASSIGN_OR_RETURN(std::string answer,
                     actions_.Txn(step.txn_type, ValueJson(b["params"]), key, deadline_));
    rapidjson::Document doc;
    RETURN_IF_ERROR(Parse(answer, "dais txn", &doc));
    if (!doc.IsObject() || !doc.HasMember("outcome")) {
      return Internal("dais txn's answer for " + step.txn_type + " has no outcome");
    }
    result->CopyFrom(doc, alloc());
    return OkStatus();
  }

  const AgentSpec& agent_;
  const std::string& run_id_;
  RunContext& ctx_;
  Actions& actions_;
  Deadline deadline_;
};

int64_t MicrosSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

RunTrace Run(const AgentSpec& agent, const std::string& run_id, int attempt,
             const std::function<void(RunContext&)>& set_event, Actions& actions,
             Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  RunTrace trace;
  trace.agent = agent.name;
  trace.run_id = run_id;
  trace.attempt = attempt;
  trace.start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  trace.outcome = "completed";
  RunContext ctx;
  set_event(ctx);
  ctx.SetRun(agent.name, run_id, attempt);
  StepRunner runner(agent, run_id, ctx, actions, deadline);
  for (const StepSpec& step : agent.steps) {
    const auto step_start = std::chrono::steady_clock::now();
    StepTrace st{step.name, StepKindName(step.kind), "ok", "", 0};
    bool stop = false, duplicate = false;
    Status s = step_start >= deadline
                   ? DeadlineExceeded("the run's deadline (run_timeout) passed before this step")
                   : runner.Run(step, &stop, &duplicate);
    st.duration_us = MicrosSince(step_start);
    if (!s.ok()) {
      st.outcome = "error";
      st.error = s.message();
      trace.outcome = "failed";
      trace.error = step.name + ": " + s.message();
      trace.error_code = s.code();
    } else if (stop) {
      st.outcome = "false";
      trace.outcome = "stopped";
    } else if (duplicate) {
      st.outcome = "duplicate";
    }
    trace.steps.push_back(std::move(st));
    if (!s.ok() || stop) break;
  }
  trace.duration_us = MicrosSince(start);
  trace.context = ctx.ToJson();
  return trace;
}

}  // namespace

RunTrace RunAgent(const AgentSpec& agent, const std::string& run_id, int attempt,
                  const Fields& event, Actions& actions, Deadline deadline) {
  return Run(
      agent, run_id, attempt, [&event](RunContext& c) { c.SetEvent(event); }, actions, deadline);
}

RunTrace RunAgent(const AgentSpec& agent, const std::string& run_id, int attempt,
                  const rapidjson::Value& event, Actions& actions, Deadline deadline) {
  return Run(
      agent, run_id, attempt, [&event](RunContext& c) { c.SetEventJson(event); }, actions,
      deadline);
}

std::string RunTrace::ToJson() const {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("agent");
  w.String(agent.c_str());
  w.Key("run_id");
  w.String(run_id.c_str());
  w.Key("attempt");
  w.Int(attempt);
  w.Key("outcome");
  w.String(outcome.c_str());
  if (!error.empty()) {
    w.Key("error");
    w.String(error.c_str());
  }
  w.Key("start_ms");
  w.Int64(start_ms);
  w.Key("duration_us");
  w.Int64(duration_us);
  w.Key("steps");
  w.StartArray();
  for (const StepTrace& s : steps) {
    w.StartObject();
    w.Key("name");
    w.String(s.name.c_str());
    w.Key("kind");
    w.String(s.kind.c_str());
    w.Key("outcome");
    w.String(s.outcome.c_str());
    if (!s.error.empty()) {
      w.Key("error");
      w.String(s.error.c_str());
    }
    w.Key("duration_us");
    w.Int64(s.duration_us);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

}  // namespace dais::agents
