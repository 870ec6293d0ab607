// What a transactions file (`dais txn --config txn.yaml`) declares: the participants, the
// decision log, and per transaction type its parameters, branches, gate and events. Clients send
// parameters only; every statement is declared here. Full format: docs/transactions.md.
//
//   participants:
//     orders: "host=127.0.0.1 port=5433 dbname=shop user=postgres"
//     inventory: "host=127.0.0.1 port=5434 dbname=shop user=postgres"
//   log: "host=127.0.0.1 port=5435 dbname=coordinator user=postgres"
//   prepare_timeout_ms: 300
//   types:
//     place_order:
//       params: {order_id: string, user_id: int, item_id: int, quantity: int, amount: number}
//       branches:
//         - participant: inventory
//           statements:
//             - sql: UPDATE stock SET qty = qty - $quantity WHERE item_id = $item_id AND qty >=
//             $quantity
//               expect_rows: 1
//               error: out of stock
//           events:
//             - {stream: "shop:purchases", fields: {user_id: $user_id, item_id: $item_id}}
//       gate:
//         model: fraud
//         input: input__0
//         vector: [$amount, $quantity, user_risk:account_age_days]
//         entity: {user_id: $user_id}
//         output: output__0
//         output_index: 1
//         threshold: 0.8
//         timeout_ms: 50
//         on_error: refuse            # or allow (commit, marked for review)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::txn {

enum class ParamType { kString, kInt, kNumber, kBool };
std::string_view ParamTypeName(ParamType t);

// A value in a statement, an event field or a gate vector: a parameter ($name), or a literal.
struct ValueRef {
  std::string param;    // non-empty: the parameter's name
  std::string literal;  // otherwise this text
};

struct StatementSpec {
  std::string sql;                  // rewritten: $name -> $1, $2, ...
  std::vector<std::string> params;  // the parameter behind $1, $2, ...
  int expect_rows = -1;             // -1: any
  std::string error;                // the refusal's message when expect_rows is not met
};

struct EventSpec {
  std::string stream;
  std::vector<std::pair<std::string, ValueRef>> fields;
};

struct BranchSpec {
  std::string participant;
  std::vector<StatementSpec> statements;
  std::vector<EventSpec> events;
};

enum class GatePolicy { kRefuse, kAllow };

// One element of the gate's input vector: a parameter, a constant, or a feature
// ("group:feature", a scalar of the entity's record in the feature store).
struct GateElement {
  std::string param;
  std::string feature;
  double constant = 0;
};

struct GateSpec {
  std::string model;
  std::string version;  // empty: the server's choice
  std::string input = "input__0";
  std::vector<GateElement> vector;
  std::string entity;        // the feature spec's entity name (e.g. user_id)
  std::string entity_param;  // the parameter holding its id
  std::string output = "output__0";
  int output_index = 1;
  double threshold = 0.8;
  int timeout_ms = 50;
  GatePolicy on_error = GatePolicy::kRefuse;
  bool uses_features() const;
};

struct TypeSpec {
  std::string name;
  std::vector<std::pair<std::string, ParamType>> params;
  std::vector<BranchSpec> branches;
  std::optional<GateSpec> gate;
};

struct TxnSpec {
  std::string source;
  std::map<std::string, std::string> participants;  // name -> libpq connection string
  std::string log;                                  // the decision log's connection string
  int prepare_timeout_ms = 300;
  std::map<std::string, TypeSpec> types;
  const TypeSpec* Find(std::string_view name) const;
};
using TxnSpecPtr = std::shared_ptr<const TxnSpec>;

StatusOr<TxnSpecPtr> ParseTxnSpec(std::string_view yaml, const std::string& source);
StatusOr<TxnSpecPtr> LoadTxnSpecFile(const std::string& path);

// A request's parameters, validated against the type: every declared parameter present with
// its type (an int is a JSON integer; a number any JSON number; a bool true/false), nothing
// undeclared. Values in text form, as statements receive them. InvalidArgument naming the
// field.
using Params = std::map<std::string, std::string>;
StatusOr<Params> ParseParams(const TypeSpec& type, std::string_view json_body);

std::string Resolve(const ValueRef& ref, const Params& params);

}  // namespace dais::txn
