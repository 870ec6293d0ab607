#include <gtest/gtest.h>

#include <map>
#include <set>

#include "agents/agent_spec.h"
#include "agents/run.h"
#include "agents/template.h"
#include "common/status_testing.h"

namespace dais::agents {
namespace {

constexpr const char* kInventory = R"(
kind: agent
name: inventory-alert
tenant: retail
priority: high
sla: {p99_ms: 500, runs_per_second: 20}
trigger: {stream: redis://127.0.0.1:6379/orders}
capabilities: {routes: [demand], feature_groups: [stock], streams: [alerts]}
steps:
  - {name: stock, features: {features: ["stock:on_hand"], entities: {sku: "${event.sku}"}}}
  - name: forecast
    infer:
      route: demand
      inputs: [{name: INPUT__0, datatype: FP32, shape: [1, 2], data: ["${event.qty}", "${stock.on_hand}"]}]
  - {name: short, branch: {if: "${forecast.OUTPUT__0.0} > ${stock.on_hand}"}}
  - {name: alert, emit: {stream: alerts, fields: {sku: "${event.sku}", need: "${forecast.OUTPUT__0.0}"}}}
)";

// Our own seam: answers as the servers would, records what was asked.
class FakeActions : public Actions {
 public:
  double on_hand = 5;
  double forecast = 9;
  bool infer_fails = false;
  std::string features_answer;  // instead of the well-formed one when set
  std::vector<std::string> calls;
  std::set<std::string> emitted_ids;
  std::vector<Fields> emitted;

  StatusOr<std::string> Features(const std::string& body, Deadline) override {
    calls.push_back("features " + body);
    if (!features_answer.empty()) return features_answer;
    return R"({"metadata":{"feature_names":["sku","on_hand"]},"results":[{"values":["42"]},)"
           R"({"values":[)" +
           std::to_string(on_hand) + "]}]}";
  }
  StatusOr<std::string> Infer(const std::string& route, const std::string& body,
                              Deadline) override {
    calls.push_back("infer " + route + " " + body);
    if (infer_fails) return Unavailable("HTTP 503 no ready instance");
    return R"({"outputs":[{"name":"OUTPUT__0","datatype":"FP32","shape":[1],"data":[)" +
           std::to_string(forecast) + "]}]}";
  }
  StatusOr<std::string> Memory(const std::string& c, const std::string& op, const std::string& b,
                               Deadline) override {
    calls.push_back("memory " + c + " " + op + " " + b);
    return std::string(R"({"results":[{"id":"u7","score":0.9,"payload":{}}]})");
  }
  StatusOr<std::string> Emit(const std::string& stream, const std::string& event_id,
                             const Fields& fields, Deadline) override {
    calls.push_back("emit " + stream + " " + event_id);
    if (!emitted_ids.insert(event_id).second) return std::string();
    emitted.push_back(fields);
    return std::to_string(emitted.size()) + "-0";
  }
  // dais txn: the first outcome per idempotency key, as its decision log keeps it.
  std::map<std::string, std::string> txn_outcomes;
  std::string txn_answer = R"({"txn_id":"t1","outcome":"committed"})";
  StatusOr<std::string> Txn(const std::string& type, const std::string& body,
                            const std::string& key, Deadline) override {
    calls.push_back("txn " + type + " " + key + " " + body);
    if (txn_answer.empty()) return Unavailable("HTTP 503: participant_unavailable");
    return txn_outcomes.emplace(key, txn_answer).first->second;
  }
};

Deadline Later() { return std::chrono::steady_clock::now() + std::chrono::seconds(5); }

TEST(AgentSpecTest, ParsesAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(kInventory));
  EXPECT_EQ(a.RedisAddress(), "127.0.0.1:6379");
  EXPECT_EQ(a.TriggerStreamName(), "orders");
  EXPECT_EQ(a.group, "inventory-alert");
  ASSERT_EQ(a.steps.size(), 4u);
  EXPECT_EQ(a.steps[1].route, "demand");
  EXPECT_EQ(a.steps[0].feature_groups, std::vector<std::string>{"stock"});
  EXPECT_EQ(a.PriorityRank(), 0);
  ASSERT_OK_AND_ASSIGN(AgentSpec b, ParseAgentYaml(AgentToJson(a)));
  EXPECT_EQ(AgentToJson(a), AgentToJson(b));
}

TEST(AgentSpecTest, RefusesWhatItCannotRunNamingTheField) {
  const std::string base = kInventory;
  auto refused = [&](std::string from, std::string to) {
    std::string yaml = base;
    const size_t at = yaml.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
    auto a = ParseAgentYaml(yaml);
    EXPECT_FALSE(a.ok()) << yaml;
    return a.ok() ? std::string() : a.status().message();
  };
  EXPECT_NE(refused("route: demand", "route: churn")
                .find("steps[1] (forecast).infer.route: 'churn' is not in capabilities.routes"),
            std::string::npos);
  EXPECT_NE(refused("${stock.on_hand}\"]", "${later.x}\"]").find("${later.x} names no earlier"),
            std::string::npos);
  EXPECT_NE(refused("priority: high", "priority: urgent").find("priority: 'urgent'"),
            std::string::npos);
  EXPECT_NE(refused("{stream: redis://127.0.0.1:6379/orders}", "{}").find("trigger: give stream"),
            std::string::npos);
  EXPECT_NE(refused("{name: short, branch:", "{name: short, branch: {}, emit:").find("exactly one"),
            std::string::npos);
  EXPECT_NE(refused("name: stock,", "name: event,").find("'event' is taken"), std::string::npos);
  EXPECT_NE(refused("\"stock:on_hand\"", "\"on_hand\"").find("is not group:feature"),
            std::string::npos);
  EXPECT_NE(refused("stream: alerts,", "stream: other,").find("capabilities.streams"),
            std::string::npos);
  EXPECT_NE(refused("tenant: retail", "tenant: ''").find("tenant: required"), std::string::npos);
  EXPECT_NE(refused("{stream: redis://127.0.0.1:6379/orders}", "{every: 1m}")
                .find("redis: required with trigger.every"),
            std::string::npos);
  EXPECT_NE(refused("redis://127.0.0.1:6379/orders", "redis:///orders").find("is not redis://"),
            std::string::npos);
  EXPECT_NE(refused("${event.sku}\"}}}", "${event.sku\"}}}").find("without its }"),
            std::string::npos);
}

TEST(AgentSpecTest, QuotedScalarsStayStringsAndPlainNumbersAreDecimal) {
  std::string yaml = kInventory;
  yaml.replace(yaml.find("sku: \"${event.sku}\", need:"), 5, "zip: \"02134\", hex: 0x1F, sku: ");
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(yaml));
  EXPECT_NE(a.steps[3].body.find(R"("zip":"02134")"), std::string::npos) << a.steps[3].body;
  EXPECT_NE(a.steps[3].body.find(R"("hex":"0x1F")"), std::string::npos) << a.steps[3].body;
  ASSERT_OK_AND_ASSIGN(AgentSpec b, ParseAgentNode(YAML::Load(yaml)));
  EXPECT_EQ(AgentToJson(a), AgentToJson(b));
}

TEST(AgentSpecTest, AKeyThatIsNotTextIsRefusedNotThrown) {
  auto a = ParseAgentYaml(std::string(kInventory) + "? [a, b]\n: c\n");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
}

TEST(RunTest, AMalformedAnswerFailsTheStepNamingIt) {
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(kInventory));
  for (const char* answer :
       {"[1]", R"({"metadata":{"feature_names":[1,2]},"results":[1,2]})",
        R"({"metadata":{"feature_names":["sku","on_hand"]},"results":[{},{}]})",
        R"({"metadata":7,"results":[]})", "not json"}) {
    FakeActions fake;
    fake.features_answer = answer;
    RunTrace t = RunAgent(a, "1-0", 1, {{"sku", "42"}, {"qty", "3"}}, fake, Later());
    EXPECT_EQ(t.outcome, "failed") << answer;
    EXPECT_NE(t.error.find("stock: "), std::string::npos) << t.error;
  }
}

TEST(TemplateTest, RendersReferencesKeepingTypesAndConditionsCompare) {
  RunContext ctx;
  ctx.SetEvent({{"sku", "42"}, {"qty", "3"}});
  rapidjson::Value out(rapidjson::kArrayType);
  out.PushBack(1.5, ctx.allocator()).PushBack(2, ctx.allocator());
  rapidjson::Value result(rapidjson::kObjectType);
  result.AddMember("OUT", out, ctx.allocator());
  ctx.Set("f", std::move(result));
  ASSERT_NE(ctx.Find("f.OUT.1"), nullptr);
  EXPECT_EQ(ctx.Find("f.OUT.1")->GetInt(), 2);
  EXPECT_EQ(ctx.Find("f.OUT.2"), nullptr);
  rapidjson::Document body;
  body.Parse(R"({"whole":"${f.OUT}","text":"sku ${event.sku} x${f.OUT.0}","n":7})");
  rapidjson::Value rendered;
  ASSERT_OK(ctx.Render(body, &rendered));
  EXPECT_TRUE(rendered["whole"].IsArray());
  EXPECT_EQ(std::string(rendered["text"].GetString()), "sku 42 x1.5");
  rapidjson::Document missing;
  missing.Parse(R"({"a":"${event.nope}"})");
  EXPECT_EQ(ctx.Render(missing, &rendered).code(), StatusCode::kNotFound);
  EXPECT_TRUE(*EvaluateCondition("${event.qty} > 2", ctx));
  EXPECT_FALSE(*EvaluateCondition("${event.qty} >= ${f.OUT.1}5", ctx));  // 3 >= 25
  EXPECT_TRUE(*EvaluateCondition("${event.sku} == 42", ctx));
  EXPECT_TRUE(*EvaluateCondition("${event.sku}", ctx));
  EXPECT_FALSE(EvaluateCondition("${event.sku} < abc", ctx).ok());
}

TEST(TemplateTest, ConversionsTurnEventTextIntoTypedValues) {
  RunContext ctx;
  ctx.SetEvent({{"qty", "3"}, {"price", "2.5"}, {"flag", "true"}, {"sku", "x1"}});
  rapidjson::Document body;
  body.Parse(R"({"q":"${event.qty|int}","p":"${event.price|number}","n":"${event.qty|number}",)"
             R"("f":"${event.flag|bool}","s":"${event.qty|string}","t":"q=${event.qty|int}"})");
  rapidjson::Value out;
  ASSERT_OK(ctx.Render(body, &out));
  EXPECT_EQ(ValueJson(out), R"({"q":3,"p":2.5,"n":3,"f":true,"s":"3","t":"q=3"})");
  body.Parse(R"({"bad":"${event.sku|int}"})");
  Status s = ctx.Render(body, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("${event.sku|int}: 'x1' is not a number"), std::string::npos);
  body.Parse(R"({"bad":"${event.price|int}"})");
  EXPECT_NE(ctx.Render(body, &out).message().find("'2.5' is not an integer"), std::string::npos);
  // An unknown conversion is refused when the spec is read; the path is what is checked.
  EXPECT_FALSE(References("${event.qty|float}").ok());
  ASSERT_OK_AND_ASSIGN(auto refs, References("${event.qty|int} ${run.id}"));
  EXPECT_EQ(refs, (std::vector<std::string>{"event.qty", "run.id"}));
  // An HTTP trigger's event keeps its JSON types.
  rapidjson::Document event;
  event.Parse(R"({"qty":3,"tags":["a"]})");
  RunContext typed;
  typed.SetEventJson(event);
  EXPECT_EQ(typed.Find("event.qty")->GetInt(), 3);
  EXPECT_EQ(typed.Find("event.tags.0")->GetString(), std::string("a"));
}

TEST(RunTest, RunsTheStepsAndEmitsOncePerRun) {
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(kInventory));
  FakeActions fake;
  const Fields order = {{"sku", "42"}, {"qty", "3"}};
  RunTrace t = RunAgent(a, "1700-0", 1, order, fake, Later());
  EXPECT_EQ(t.outcome, "completed") << t.error;
  ASSERT_EQ(t.steps.size(), 4u);
  EXPECT_EQ(fake.calls[0], R"(features {"features":["stock:on_hand"],"entities":{"sku":["42"]}})");
  EXPECT_EQ(fake.calls[1],
            R"(infer demand {"id":"1700-0","inputs":[{"name":"INPUT__0","datatype":"FP32",)"
            R"("shape":[1,2],"data":[3,5.0]}]})");
  ASSERT_EQ(fake.emitted.size(), 1u);
  EXPECT_EQ(fake.emitted[0], (Fields{{"sku", "42"}, {"need", "9.0"}}));
  // The same trigger again (a redelivery after a crash): the emit is recognised, not repeated.
  RunTrace again = RunAgent(a, "1700-0", 2, order, fake, Later());
  EXPECT_EQ(again.outcome, "completed");
  EXPECT_EQ(again.steps.back().outcome, "duplicate");
  EXPECT_EQ(fake.emitted.size(), 1u);
  EXPECT_NE(t.ToJson().find(R"("outcome":"completed")"), std::string::npos);
}

TEST(RunTest, AFalseBranchStopsAndAFailingStepFailsTheRun) {
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(kInventory));
  FakeActions fake;
  fake.forecast = 2;  // below the stock: no alert
  RunTrace t = RunAgent(a, "1-0", 1, {{"sku", "42"}, {"qty", "3"}}, fake, Later());
  EXPECT_EQ(t.outcome, "stopped");
  EXPECT_EQ(t.steps.back().outcome, "false");
  EXPECT_TRUE(fake.emitted.empty());
  fake.infer_fails = true;
  t = RunAgent(a, "2-0", 1, {{"sku", "42"}, {"qty", "3"}}, fake, Later());
  EXPECT_EQ(t.outcome, "failed");
  EXPECT_EQ(t.error, "forecast: HTTP 503 no ready instance");
  // An event without the field a step needs fails the run, naming the reference.
  fake.infer_fails = false;
  t = RunAgent(a, "3-0", 1, {{"qty", "3"}}, fake, Later());
  EXPECT_EQ(t.outcome, "failed");
  EXPECT_NE(t.error.find("${event.sku} refers to nothing"), std::string::npos) << t.error;
  // A field that is not a number where the model needs one.
  t = RunAgent(a, "4-0", 1, {{"sku", "42"}, {"qty", "many"}}, fake, Later());
  EXPECT_NE(t.error.find("input INPUT__0: 'many' is not a number"), std::string::npos) << t.error;
  // Past the deadline: the step is not started.
  t = RunAgent(a, "5-0", 1, {{"sku", "42"}, {"qty", "3"}}, fake,
               std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(t.outcome, "failed");
  EXPECT_NE(t.error.find("deadline"), std::string::npos);
}

TEST(RunTest, MemorySearchResultsAreReferencedByLaterSteps) {
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(R"(
kind: agent
name: retention
tenant: growth
trigger: {every: 1m}
redis: 127.0.0.1:6379
capabilities: {collections: [users], streams: [offers]}
steps:
  - {name: similar, memory_search: {collection: users, vector: ["${event.x}", 0.5], k: 3}}
  - {name: offer, emit: {stream: offers, fields: {user: "${similar.ids.0}", s: "${similar.scores.0}"}}}
)"));
  FakeActions fake;
  RunTrace t = RunAgent(a, "t1", 1, {{"x", "0.25"}}, fake, Later());
  EXPECT_EQ(t.outcome, "completed") << t.error;
  EXPECT_EQ(fake.calls[0], R"(memory users search {"vector":[0.25,0.5],"k":3})");
  ASSERT_EQ(fake.emitted.size(), 1u);
  EXPECT_EQ(fake.emitted[0], (Fields{{"user", "u7"}, {"s", "0.9"}}));
}

TEST(RunTest, ATxnStepIsKeyedByTheRunAndItsRefusalIsAnOutcome) {
  constexpr const char* kHold = R"(
kind: agent
name: hold
tenant: retail
trigger: {stream: redis://127.0.0.1:6379/orders}
capabilities: {transactions: [reserve], streams: [held]}
steps:
  - {name: reserve, txn: {type: reserve, params: {sku: "${event.sku}", qty: "${event.qty}"}}}
  - {name: ok, branch: {if: "${reserve.outcome} == committed"}}
  - {name: tell, emit: {stream: held, fields: {txn: "${reserve.txn_id}"}}}
)";
  ASSERT_OK_AND_ASSIGN(AgentSpec a, ParseAgentYaml(kHold));
  ASSERT_OK_AND_ASSIGN(AgentSpec b, ParseAgentYaml(AgentToJson(a)));
  EXPECT_EQ(b.capabilities.transactions, std::vector<std::string>{"reserve"});
  EXPECT_EQ(b.steps[0].txn_type, "reserve");
  FakeActions fake;
  RunTrace t = RunAgent(a, "9-0", 1, {{"sku", "42"}, {"qty", "3"}}, fake, Later());
  EXPECT_EQ(t.outcome, "completed") << t.error;
  EXPECT_EQ(fake.calls[0], R"(txn reserve hold:9-0:reserve {"sku":"42","qty":"3"})");
  ASSERT_EQ(fake.emitted.size(), 1u);
  EXPECT_EQ(fake.emitted[0], (Fields{{"txn", "t1"}}));
  // A refusal (409) is the step's result: the branch stops the run, which did not fail.
  fake.txn_answer = R"({"txn_id":"t2","outcome":"aborted","reason":"branch_failed"})";
  t = RunAgent(a, "10-0", 1, {{"sku", "42"}, {"qty", "99"}}, fake, Later());
  EXPECT_EQ(t.outcome, "stopped") << t.error;
  // An unavailable coordinator fails the run (retried with the same key).
  fake.txn_answer = "";
  t = RunAgent(a, "11-0", 1, {{"sku", "42"}, {"qty", "1"}}, fake, Later());
  EXPECT_EQ(t.outcome, "failed");
  EXPECT_EQ(t.error, "reserve: HTTP 503: participant_unavailable");
  // A type not in capabilities.transactions, and a step without params, are refused at apply.
  std::string other = kHold;
  other.replace(other.find("transactions: [reserve]"), 23, "transactions: [refund]");
  EXPECT_NE(ParseAgentYaml(other).status().message().find(
                "steps[0] (reserve).txn.type: 'reserve' is not in capabilities.transactions"),
            std::string::npos);
  other = kHold;
  const std::string params = R"(, params: {sku: "${event.sku}", qty: "${event.qty}"})";
  other.replace(other.find(params), params.size(), "");
  EXPECT_NE(ParseAgentYaml(other).status().message().find("txn.params: expected a mapping"),
            std::string::npos)
      << other;
}

}  // namespace
}  // namespace dais::agents
