#include "txn/txn_spec.h"

#include <gtest/gtest.h>

namespace dais::txn {
namespace {

constexpr const char* kSpec = R"(
participants:
  orders: "host=127.0.0.1 dbname=orders"
  inventory: "host=127.0.0.1 dbname=inventory"
log: "host=127.0.0.1 dbname=coord"
prepare_timeout_ms: 250
types:
  place_order:
    params: {order_id: string, user_id: int, item_id: int, quantity: int, amount: number}
    branches:
      - participant: orders
        statements:
          - INSERT INTO orders VALUES ($order_id, $user_id, $item_id, $quantity, $amount)
        events:
          - {stream: "shop:purchases", fields: {user_id: $user_id, item_id: $item_id, kind: buy}}
      - participant: inventory
        statements:
          - sql: UPDATE stock SET qty = qty - $quantity WHERE item_id = $item_id AND qty >= $quantity
            expect_rows: 1
            error: out of stock
    gate:
      model: fraud
      vector: [$amount, $quantity, 1.5, user_risk:chargebacks]
      entity: {user_id: $user_id}
      threshold: 0.8
      timeout_ms: 40
      on_error: allow
)";

TEST(TxnSpec, ParsesAndRewritesPlaceholders) {
  auto spec = ParseTxnSpec(kSpec, "t.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ((*spec)->prepare_timeout_ms, 250);
  const TypeSpec* t = (*spec)->Find("place_order");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->branches.size(), 2u);
  EXPECT_EQ(t->branches[0].statements[0].sql, "INSERT INTO orders VALUES ($1, $2, $3, $4, $5)");
  const StatementSpec& upd = t->branches[1].statements[0];
  EXPECT_EQ(upd.sql, "UPDATE stock SET qty = qty - $1 WHERE item_id = $2 AND qty >= $1");
  EXPECT_EQ(upd.params, (std::vector<std::string>{"quantity", "item_id"}));
  EXPECT_EQ(upd.expect_rows, 1);
  EXPECT_EQ(upd.error, "out of stock");
  ASSERT_TRUE(t->gate.has_value());
  EXPECT_EQ(t->gate->vector.size(), 4u);
  EXPECT_DOUBLE_EQ(t->gate->vector[2].constant, 1.5);
  EXPECT_EQ(t->gate->vector[3].feature, "user_risk:chargebacks");
  EXPECT_EQ(t->gate->entity, "user_id");
  EXPECT_EQ(t->gate->on_error, GatePolicy::kAllow);
  EXPECT_EQ(t->branches[0].events[0].fields[2].second.literal, "buy");
}

TEST(TxnSpec, RefusesWhatIsWrongNamingIt) {
  std::string s = kSpec;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string c = s;
    c.replace(c.find(from), from.size(), to);
    return ParseTxnSpec(c, "t.yaml");
  };
  auto r = with("$item_id AND", "$itm AND");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown parameter $itm"), std::string::npos);
  r = with("participant: inventory", "participant: billing");
  EXPECT_NE(r.status().message().find("unknown participant 'billing'"), std::string::npos);
  r = with("on_error: allow", "on_error: maybe");
  EXPECT_NE(r.status().message().find("on_error"), std::string::npos);
  r = with("quantity: int,", "quantity: integer,");
  EXPECT_NE(r.status().message().find("unknown parameter type 'integer'"), std::string::npos);
  r = with("$quantity WHERE", "$1 WHERE");
  EXPECT_NE(r.status().message().find("positional"), std::string::npos);
  EXPECT_FALSE(ParseTxnSpec("[1, 2", "x").ok());
  // Issue 32: wrong shapes were accepted silently and emitted no events.
  const std::string events =
      "- {stream: \"shop:purchases\", fields: {user_id: $user_id, item_id: $item_id, kind: buy}}";
  r = with(events, "oops");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(".events: expected a list"), std::string::npos)
      << r.status().message();
  r = with("fields: {user_id: $user_id, item_id: $item_id, kind: buy}", "fields: x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("events[0].fields: expected a mapping"), std::string::npos)
      << r.status().message();
  r = with("kind: buy}", "kind: [a]}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fields.kind: expected"), std::string::npos);
  r = with(events, "- just-a-string");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("events[0]: expected a mapping"), std::string::npos);
}

TEST(TxnSpec, ParamsAreTypedAndComplete) {
  auto spec = ParseTxnSpec(kSpec, "t.yaml");
  ASSERT_TRUE(spec.ok());
  const TypeSpec& t = *(*spec)->Find("place_order");
  auto p = ParseParams(t, R"({"order_id":"o1","user_id":7,"item_id":3,"quantity":2,"amount":9.5})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->at("amount"), "9.5");
  EXPECT_EQ(p->at("user_id"), "7");
  auto bad =
      ParseParams(t, R"({"order_id":"o1","user_id":"7","item_id":3,"quantity":2,"amount":1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "'user_id': expected int");
  bad = ParseParams(t, R"({"order_id":"o1","user_id":7,"item_id":3,"quantity":2.5,"amount":1})");
  EXPECT_EQ(bad.status().message(), "'quantity': expected int");
  bad = ParseParams(t, R"({"order_id":"o1","user_id":7,"item_id":3,"amount":1})");
  EXPECT_EQ(bad.status().message(), "'quantity': missing (int)");
  bad = ParseParams(
      t, R"({"order_id":"o1","user_id":7,"item_id":3,"quantity":1,"amount":1,"sql":"x"})");
  EXPECT_EQ(bad.status().message(), "'sql': not a parameter of place_order");
  EXPECT_FALSE(ParseParams(t, "[1]").ok());
  EXPECT_FALSE(ParseParams(t, "{").ok());
}

}  // namespace
}  // namespace dais::txn
