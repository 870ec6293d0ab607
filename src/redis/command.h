// Vocabulary shared by the client layers: deadlines, keyed commands, callbacks.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dais/status.h"
#include "redis/resp.h"

namespace dais::redis {

using Deadline = std::chrono::steady_clock::time_point;

// `key` routes the command in cluster mode (its hash slot picks the master); "" = any node. In
// standalone mode it is ignored. The key is not added to `command`: write it there too.
struct KeyedCommand {
  std::string key;
  Command command;
  // Instead of `command`: the command already RESP-encoded (AppendArrayHeader + AppendBulk), for
  // hot paths that build it without a vector of strings. Used when not empty; not validated.
  std::string encoded = {};
};

using ReplyCallback = std::function<void(StatusOr<Reply>)>;
using BatchCallback = std::function<void(std::vector<StatusOr<Reply>>)>;

}  // namespace dais::redis
