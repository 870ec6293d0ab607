#include "cmd/agent_actions.h"

#include <rapidjson/document.h>

#include <algorithm>

#include "common/json.h"

namespace dais::cmd {
namespace {

// KEYS[1]: the marker of the event id, KEYS[2]: the stream. ARGV: the marker's TTL, the stream's
// MAXLEN, then field, value pairs. The marker and the entry are written together or not at all,
// so a retried run finds the marker and appends nothing. The marker's key carries the stream's
// name as its hash tag: both land in one slot of a Redis Cluster.
const redis::Script kEmitOnce(R"(
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[1])) then
  return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
end
return ''
)");

std::chrono::milliseconds Left(agents::Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

AgentActions::AgentActions(const AgentEndpoints& endpoints, redis::Client* redis)
    : endpoints_(endpoints),
      redis_(redis),
      gateway_(endpoints.gateway, endpoints.token),
      features_(endpoints.features_url.empty() ? endpoints.gateway : endpoints.features_url,
                endpoints.token) {
  if (!endpoints.txn_url.empty()) {
    txn_ = std::make_unique<HttpJsonClient>(endpoints.txn_url, endpoints.token);
  }
}

StatusOr<std::string> AgentActions::Post(HttpJsonClient& client, const std::string& target,
                                         const std::string& body, agents::Deadline deadline) {
  ASSIGN_OR_RETURN(HttpAnswer answer, client.Call("POST", target, body, deadline));
  RETURN_IF_ERROR(AnswerStatus(answer));
  return std::move(answer.body);
}

StatusOr<std::string> AgentActions::Features(const std::string& body, agents::Deadline deadline) {
  return Post(features_, "/get-online-features", body, deadline);
}

StatusOr<std::string> AgentActions::Infer(const std::string& route, const std::string& body,
                                          agents::Deadline deadline) {
  return Post(gateway_, "/v2/models/" + route + "/infer", body, deadline);
}

StatusOr<std::string> AgentActions::Memory(const std::string& collection, const std::string& op,
                                           const std::string& body, agents::Deadline deadline) {
  return Post(gateway_, "/v2/memory/collections/" + collection + "/" + op, body, deadline);
}

StatusOr<std::string> AgentActions::Emit(const std::string& stream, const std::string& event_id,
                                         const agents::Fields& fields, agents::Deadline deadline) {
  std::vector<std::string> args = {std::to_string(endpoints_.emitted_ttl_secs),
                                   std::to_string(endpoints_.emit_max_len), "event_id", event_id};
  for (const auto& [k, v] : fields) {
    args.push_back(k);
    args.push_back(v);
  }
  // The marker in the stream's slot: Redis hashes a key by its first {tag} when it has one.
  std::string tag = stream;
  if (const size_t open = stream.find('{'); open != std::string::npos) {
    const size_t close = stream.find('}', open + 1);
    if (close != std::string::npos && close > open + 1)
      tag = stream.substr(open + 1, close - open - 1);
  }
  auto reply = redis_->RunEval(kEmitOnce, {"dais:emitted:{" + tag + "}:" + event_id, stream},
                               std::move(args), Left(deadline));
  if (!reply.ok()) return Unavailable("emit to " + stream + ": " + reply.status().message());
  if (reply->is_error()) return Unavailable("emit to " + stream + ": " + reply->str);
  return reply->str;  // the entry's id; "" when emitted before
}

StatusOr<std::string> AgentActions::Txn(const std::string& type, const std::string& body,
                                        const std::string& key, agents::Deadline deadline) {
  if (!txn_) {
    return FailedPrecondition(
        "no dais txn to call: start the runtime with --txn-url (a node: "
        "--agent-txn-url)");
  }
  ASSIGN_OR_RETURN(HttpAnswer answer, txn_->Call("POST", "/v1/txn/" + type, body, deadline,
                                                 {{"Idempotency-Key", key}}));
  if (answer.status == 409) {
    // Decided: refused (branch_failed, gate_refused), the outcome the run reports; but a retry
    // that arrives while the first attempt still runs is not a decision.
    rapidjson::Document d;
    const rapidjson::Value& root = d;
    if (json::ParseJson(answer.body, &d).ok() && root.IsObject() && root.HasMember("outcome")) {
      return std::move(answer.body);
    }
  }
  RETURN_IF_ERROR(AnswerStatus(answer));
  return std::move(answer.body);
}

}  // namespace dais::cmd
