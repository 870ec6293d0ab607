// The values a run's steps see, and the ${...} references that reach them (docs/agents.md,
// "References").
//
// A run's context is one JSON object: "event" (the trigger's fields, as published: strings),
// "run" ({"id", "attempt", "agent"}) and one member per finished step, named by the step, holding
// its result (features: {feature: value}; infer: {OUTPUT: data}; memory_search: {"ids",
// "scores", "results"}; emit: {"id", "duplicate"}). A reference is a dotted path into it;
// numbers index arrays: ${forecast.OUTPUT__0.0}.
//
// Rendering a step's body (JSON): a string that is exactly one reference becomes the referenced
// value, whatever its type (an array stays an array); a string with references inside text gets
// each replaced by its text (a string as it is, anything else as JSON). A reference to nothing is
// NotFound naming it. A reference may end in a conversion: ${event.qty|int} (a whole number:
// "3" -> 3), |number, |string, |bool (true, false, 1, 0); a value it cannot convert is
// InvalidArgument naming the reference. (A stream's event fields are strings; a typed API such
// as dais txn's parameters needs them converted.)
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dais/status.h"

namespace dais::agents {

class RunContext {
 public:
  RunContext();
  void SetEvent(const std::vector<std::pair<std::string, std::string>>& fields);
  // An event with types (an HTTP trigger's JSON object).
  void SetEventJson(const rapidjson::Value& event);
  void SetRun(const std::string& agent, const std::string& run_id, int attempt);
  // Moves `value` (allocated by allocator()) in as member `name`.
  void Set(const std::string& name, rapidjson::Value value);
  // The value at `path` ("event.sku", "forecast.OUTPUT__0.0"), or null.
  const rapidjson::Value* Find(std::string_view path) const;
  // `body` with every reference replaced.
  Status Render(const rapidjson::Value& body, rapidjson::Value* out) const;
  rapidjson::Document::AllocatorType& allocator() { return doc_.GetAllocator(); }
  std::string ToJson() const;

 private:
  Status RenderString(std::string_view text, rapidjson::Value* out) const;
  rapidjson::Document doc_;
};

// The paths referenced in `text` ("${a.b} and ${c}" -> {"a.b", "c"}); InvalidArgument for an
// unclosed or empty reference.
StatusOr<std::vector<std::string>> References(std::string_view text);

// A condition: "LEFT OP RIGHT" (OP one of == != < <= > >=) or a single operand (true unless
// empty, 0, false or null). Operands are rendered; both numbers (or strings that read as
// numbers) compare as numbers, otherwise as text (== and != only).
StatusOr<bool> EvaluateCondition(std::string_view condition, const RunContext& context);

// A value as JSON text; as text inside text (a string as it is, anything else as JSON).
std::string ValueJson(const rapidjson::Value& v);
std::string ValueText(const rapidjson::Value& v);

// A number from a JSON number or a string that reads as one.
bool AsNumber(const rapidjson::Value& v, double* out);

}  // namespace dais::agents
