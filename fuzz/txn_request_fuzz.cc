// Fuzzes what `dais txn` reads from outside: a request's parameters (JSON body, validated against
// the example's place_order type) and, from the same input, a transactions file (YAML). Neither
// may crash, hang or leak; errors are InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "txn/txn_spec.h"

namespace {

constexpr const char* kSpec = R"yaml(
participants: {orders: "dbname=o", inventory: "dbname=i"}
log: "dbname=c"
types:
  place_order:
    params: {order_id: string, user_id: int, item_id: int, quantity: int, amount: number, vip: bool}
    branches:
      - participant: orders
        statements: ["INSERT INTO orders VALUES ($order_id, $user_id, $item_id, $quantity, $amount)"]
        events: [{stream: s, fields: {user_id: $user_id, item_id: $item_id}}]
      - participant: inventory
        statements:
          - {sql: "UPDATE stock SET qty = qty - $quantity WHERE item_id = $item_id", expect_rows: 1}
    gate: {model: fraud, vector: [$amount, $quantity, 1], threshold: 0.8, timeout_ms: 50}
)yaml";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto spec = dais::txn::ParseTxnSpec(kSpec, "fuzz.yaml");
  if (!spec.ok()) __builtin_trap();
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto params = dais::txn::ParseParams(*(*spec)->Find("place_order"), input);
  if (params.ok() && params->size() != 6) __builtin_trap();  // all declared, nothing else
  if (size < 4096) (void)dais::txn::ParseTxnSpec(input, "input.yaml");
  return 0;
}
