#!/usr/bin/python3
"""The `dais txn` example end to end (docs/transactions.md), on loopback, then everything stopped:
three PostgreSQL servers (orders, inventory, the decision log; initdb'd in /tmp, run as the
`postgres` user), redis-server, `dais serve` with the fraud model and the `recommend` model, and
`dais txn serve --recent-items`. Places a few orders and prints each answer: a normal one, a
fraudster's, one out of stock, a retry with the same Idempotency-Key; then what an enriched
inference for the buyer sees in its "recently purchased items".

usage: scripts/txn_demo.py [--build build/release]     (after scripts/setup.sh and the build)
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    os.environ["DAIS_BIN"] = str(Path(args.build) / "src/cmd/dais")
    import requests
    from txn_util import (PgServer, TxnProcess, setup_shop, start_shop_services, stop_all,
                          write_txn_yaml)

    tmp = Path(tempfile.mkdtemp(prefix="dais-txn-demo-"))
    pgs, procs, coordinator = [], [], None
    try:
        print("starting PostgreSQL x3 (orders, inventory, decision log), Redis, dais serve ...")
        pgs = [PgServer(n) for n in ("orders", "inventory", "log")]
        setup_shop(*pgs, {item: 10 for item in range(1, 6)})
        redis_port, grpc, repo, http = start_shop_services(tmp, procs)
        serve = f"http://127.0.0.1:{http}"
        # The fraudster's risk profile, pushed into the feature store (Feast push API).
        requests.post(f"{serve}/push", json={
            "push_source_name": "user_risk", "to": "online",
            "df": {"user_id": [42, 666], "event_timestamp": [int(time.time())] * 2,
                   "account_age_days": [400, 2], "chargebacks_90d": [0, 5],
                   "orders_24h": [1, 3]}}, timeout=5).raise_for_status()
        txn_yaml = write_txn_yaml(tmp / "txn.yaml", *pgs)
        coordinator = TxnProcess(["--config", txn_yaml, "--id", "demo",
                                  "--gate-server", f"127.0.0.1:{grpc}",
                                  "--redis", f"127.0.0.1:{redis_port}",
                                  "--feature-spec", repo / "recommend/features.yaml",
                                  "--recent-items", "--stream", "shop:purchases"], tmp / "logs")
        url = f"{coordinator.url}/v1/txn/place_order"
        print(f"dais txn on {coordinator.url}\n")

        def place(what, body, key=None):
            headers = {"Idempotency-Key": key} if key else {}
            r = requests.post(url, json=body, headers=headers, timeout=10)
            print(f"== {what}\n$ curl -d '{json.dumps(body)}' {url}"
                  f"{' -H Idempotency-Key:' + key if key else ''}\n{r.status_code} {r.text}\n")
            return r

        place("an order (user 42, item 3)", {"order_id": "o-1", "user_id": 42, "item_id": 3,
                                             "quantity": 2, "amount": 40.0}, key="o-1")
        place("the same request retried (same Idempotency-Key: the first answer)",
              {"order_id": "o-1", "user_id": 42, "item_id": 3, "quantity": 2, "amount": 40.0},
              key="o-1")
        place("a fraudster (user 666: 5 chargebacks, 2-day-old account)",
              {"order_id": "o-2", "user_id": 666, "item_id": 4, "quantity": 1, "amount": 1500.0})
        place("out of stock (item 5 has 10)", {"order_id": "o-3", "user_id": 42, "item_id": 5,
                                               "quantity": 50, "amount": 10.0})
        place("a bad request", {"order_id": "o-4", "user_id": "forty-two", "item_id": 1,
                                "quantity": 1, "amount": 1.0})
        for _ in range(100):
            r = requests.post(f"{serve}/v2/models/recommend/infer",
                              json={"inputs": [], "parameters": {"entity_ids": [42]}}, timeout=5)
            if r.ok and r.json()["outputs"][0]["data"][0] == 3:
                break
            time.sleep(0.02)
        print("== an enriched inference for user 42 sees the purchase (recently purchased items)")
        print(f"$ curl -d '{{\"inputs\":[],\"parameters\":{{\"entity_ids\":[42]}}}}' "
              f"{serve}/v2/models/recommend/infer\n{r.status_code} {r.text}\n")
        stock = pgs[1].query("shop", "SELECT item_id, qty FROM stock ORDER BY item_id")
        orders = pgs[0].query("shop", "SELECT order_id, user_id, item_id, quantity FROM orders")
        print(f"inventory.stock: {stock}\norders.orders: {orders}")
    finally:
        if coordinator:
            coordinator.stop()
        stop_all(procs, pgs, tmp)


if __name__ == "__main__":
    main()
