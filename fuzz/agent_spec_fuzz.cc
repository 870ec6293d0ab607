// libFuzzer target for agents (docs/agents.md): the input's first line is an event's fields
// ("k=v;k=v"), the rest an agent spec. ParseAgentYaml either refuses the spec with
// InvalidArgument or accepts one whose stored JSON parses back to the same JSON; an accepted agent
// then runs on that event against answers of the right shape whose values come from the event
// (references, conditions and tensor data rendered from hostile values): any outcome is fine, a
// crash, a sanitizer report or a run without a recorded outcome is not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agents/agent_spec.h"
#include "agents/run.h"

namespace {

using dais::StatusOr;
using dais::agents::Deadline;
using dais::agents::Fields;

// Answers as the servers would, built from the event's text (so also malformed ones).
class Echo : public dais::agents::Actions {
 public:
  explicit Echo(std::string v) : v_(std::move(v)) {}
  StatusOr<std::string> Features(const std::string&, Deadline) override {
    return R"({"metadata":{"feature_names":["e","f"]},"results":[{"values":[1]},{"values":[)" + v_ +
           "]}]}";
  }
  StatusOr<std::string> Infer(const std::string&, const std::string&, Deadline) override {
    return R"({"outputs":[{"name":"OUTPUT__0","data":[)" + v_ + "]}]}";
  }
  StatusOr<std::string> Memory(const std::string&, const std::string&, const std::string&,
                               Deadline) override {
    return R"({"results":[{"id":)" + v_ + R"(,"score":)" + v_ + "}]}";
  }
  StatusOr<std::string> Emit(const std::string&, const std::string&, const Fields&,
                             Deadline) override {
    return v_;
  }
  StatusOr<std::string> Txn(const std::string&, const std::string&, const std::string&,
                            Deadline) override {
    return R"({"outcome":)" + v_ + "}";
  }

 private:
  std::string v_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  const std::string_view first = input.substr(0, eol);
  const std::string spec_text(eol == std::string_view::npos ? "" : input.substr(eol + 1));
  auto agent = dais::agents::ParseAgentYaml(spec_text);
  if (!agent.ok()) {
    if (agent.status().code() != dais::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  const std::string json = dais::agents::AgentToJson(*agent);
  auto again = dais::agents::ParseAgentYaml(json);
  if (!again.ok() || dais::agents::AgentToJson(*again) != json) __builtin_trap();
  Fields event;
  std::string_view rest = first;
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    const std::string_view kv = rest.substr(0, semi);
    const size_t eq = kv.find('=');
    event.emplace_back(std::string(kv.substr(0, eq)),
                       eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1)));
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
  }
  Echo actions(event.empty() ? "1" : event.front().second);
  const auto trace = dais::agents::RunAgent(*agent, "1-0", 1, event, actions,
                                            Deadline::clock::now() + std::chrono::seconds(5));
  if (trace.outcome != "completed" && trace.outcome != "stopped" && trace.outcome != "failed") {
    __builtin_trap();
  }
  return 0;
}
