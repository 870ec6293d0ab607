// One run of an agent: its steps in order over a RunContext (template.h), each step's call made
// through Actions (the seam: `dais agent run` implements it over HTTP and Redis; tests fake it).
// A failing step fails the run (the runtime retries the trigger up to max_attempts: every write
// step is keyed by the run's id, so a retried run writes nothing twice); a branch whose condition
// is false ends the run early (outcome "stopped").
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agents/agent_spec.h"
#include "dais/status.h"

namespace dais::agents {

using Deadline = std::chrono::steady_clock::time_point;
using Fields = std::vector<std::pair<std::string, std::string>>;

class Actions {
 public:
  virtual ~Actions() = default;
  // Each returns the answer's JSON body, or an error naming what failed (the HTTP status and the
  // server's message).
  // Feast's POST /get-online-features.
  virtual StatusOr<std::string> Features(const std::string& body, Deadline deadline) = 0;
  // KServe v2 POST /v2/models/<route>/infer through the gateway.
  virtual StatusOr<std::string> Infer(const std::string& route, const std::string& body,
                                      Deadline deadline) = 0;
  // POST /v2/memory/collections/<collection>/<op> (op: search, upsert).
  virtual StatusOr<std::string> Memory(const std::string& collection, const std::string& op,
                                       const std::string& body, Deadline deadline) = 0;
  // Appends `fields` to `stream` once per `event_id` (also written as the field event_id): the
  // new entry's id, or "" when that event id was emitted before (a retried run).
  virtual StatusOr<std::string> Emit(const std::string& stream, const std::string& event_id,
                                     const Fields& fields, Deadline deadline) = 0;
  // `dais txn`'s POST /v1/txn/<type> with the header Idempotency-Key: `key` (a retried run gets
  // the first outcome, the transaction is placed once). The answer's body when the transaction
  // was decided, committed (200) or refused (409: {"outcome": "aborted", "reason", "error"});
  // an error otherwise.
  virtual StatusOr<std::string> Txn(const std::string& type, const std::string& body,
                                    const std::string& key, Deadline deadline) = 0;
};

struct StepTrace {
  std::string name;
  std::string kind;
  std::string outcome;  // ok | duplicate (an emit already made) | false (a branch) | error
  std::string error;
  int64_t duration_us = 0;
};

struct RunTrace {
  std::string agent;
  std::string run_id;
  int attempt = 1;
  std::string outcome;                      // completed | stopped | failed
  std::string error;                        // "forecast: HTTP 503 ..." when failed
  StatusCode error_code = StatusCode::kOk;  // the failing step's
  int64_t start_ms = 0;                     // Unix time
  int64_t duration_us = 0;
  std::vector<StepTrace> steps;
  // The run's context at its end as JSON (event, run, each finished step's result): what an
  // HTTP trigger answers. Not part of ToJson (the runs stream keeps the trace only).
  std::string context;
  std::string ToJson() const;
};

// Runs `agent`'s steps for one trigger. `event`: the trigger's fields.
RunTrace RunAgent(const AgentSpec& agent, const std::string& run_id, int attempt,
                  const Fields& event, Actions& actions, Deadline deadline);
// The same with an event that has types (an HTTP trigger's JSON object).
RunTrace RunAgent(const AgentSpec& agent, const std::string& run_id, int attempt,
                  const rapidjson::Value& event, Actions& actions, Deadline deadline);

}  // namespace dais::agents
