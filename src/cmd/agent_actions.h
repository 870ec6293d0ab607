// The agent runtime's side of agents::Actions: inference and memory through the gateway, features
// from a feature server (Feast's /get-online-features), emits to Redis exactly once per event id
// (a Lua script sets a marker and appends in one step). One per worker thread (the HTTP
// connections are not shared); the Redis client is shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "agents/run.h"
#include "cmd/http_json_client.h"
#include "redis/client.h"

namespace dais::cmd {

struct AgentEndpoints {
  std::string gateway;
  std::string features_url;
  std::string token;
  std::string txn_url;  // dais txn (http://HOST:PORT); empty: txn steps fail naming the flag
  int64_t emit_max_len = 1000000;
  int emitted_ttl_secs = 7 * 86400;
};

class AgentActions : public agents::Actions {
 public:
  AgentActions(const AgentEndpoints& endpoints, redis::Client* redis);

  StatusOr<std::string> Features(const std::string& body, agents::Deadline deadline) override;
  StatusOr<std::string> Infer(const std::string& route, const std::string& body,
                              agents::Deadline deadline) override;
  StatusOr<std::string> Memory(const std::string& collection, const std::string& op,
                               const std::string& body, agents::Deadline deadline) override;
  StatusOr<std::string> Emit(const std::string& stream, const std::string& event_id,
                             const agents::Fields& fields, agents::Deadline deadline) override;
  StatusOr<std::string> Txn(const std::string& type, const std::string& body,
                            const std::string& key, agents::Deadline deadline) override;

 private:
  StatusOr<std::string> Post(HttpJsonClient& client, const std::string& target,
                             const std::string& body, agents::Deadline deadline);

  const AgentEndpoints endpoints_;
  redis::Client* redis_;
  HttpJsonClient gateway_;
  HttpJsonClient features_;
  std::unique_ptr<HttpJsonClient> txn_;  // when txn_url is set
};

}  // namespace dais::cmd
