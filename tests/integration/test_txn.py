"""Issue 16, `dais txn`: the two-phase-commit coordinator over real PostgreSQL servers (orders and
inventory participants, the coordinator's decision log), with the fraud gate served by a real
`dais serve` (XGBoost over gRPC), events through the outbox and a Redis stream to the recent-items
consumer, and an enriched inference that sees the purchase. Crash points are injected with
`--crash-at` (the coordinator SIGKILLs itself at that step); participants are killed and frozen
with signals to their PIDs."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest
import requests

from conftest import dais_binary, make_certs, metric_value, parse_prometheus, wait_for
from otlp_collector import Collector
from txn_util import (EXAMPLE, PgServer, TxnProcess, check_invariants, setup_shop,
                      write_txn_yaml)

ITEMS = {item: 1000 for item in range(1, 11)}
FRAUDSTER = 666
STREAM = "shop:purchases"
FEEDBACK = "shop:feedback"  # the model server's records: the gate's calls with their trace


class Shop:
    def __init__(self, base, pgs, srv, redis, fspec, txn_yaml):
        self.base = base
        self.orders, self.inventory, self.log = pgs
        self.srv = srv
        self.redis = redis
        self.fspec = fspec
        self.txn_yaml = txn_yaml
        self.accepted: set[str] = set()
        self.refused: set[str] = set()
        self.live: list[TxnProcess] = []

    def coordinator(self, *extra, config=None, wait=True, gate=None) -> TxnProcess:
        args = ["--config", config or self.txn_yaml, "--id", "shop-1",
                "--gate-server", gate or f"127.0.0.1:{self.srv.grpc_port}",
                "--redis", self.redis.addr, "--feature-spec", self.fspec,
                "--workers", "8", "--resolve-interval-ms", "200", "--grpc-port", "0", *extra]
        t = TxnProcess(args, self.base / "logs", wait=wait)
        self.live.append(t)
        return t

    def order(self, user=42, item=1, quantity=1, amount=25.0) -> dict:
        return {"order_id": f"o-{uuid.uuid4().hex[:12]}", "user_id": user, "item_id": item,
                "quantity": quantity, "amount": amount}

    def record(self, params, r):
        oid = params["order_id"]
        if r.status_code == 200:
            self.accepted.add(oid)
            self.refused.discard(oid)  # a retry of a refused order went through
        elif oid not in self.accepted:
            self.refused.add(oid)

    def invariants(self):
        return check_invariants(self.orders, self.inventory, ITEMS, self.accepted, self.refused)

    def recent_items(self, user) -> list[int]:
        r = self.srv.post("/v2/models/recommend/infer",
                          json={"inputs": [], "parameters": {"entity_ids": [user]}})
        assert r.status_code == 200, r.text
        return r.json()["outputs"][0]["data"]

    def events(self) -> list[dict]:
        out = []
        for entry_id, fields in self.redis.call("XRANGE", STREAM, "-", "+"):
            kv = dict(zip(fields[0::2], fields[1::2]))
            out.append({k.decode(): v.decode() for k, v in kv.items()} | {"_id": entry_id})
        return out


@pytest.fixture(scope="module")
def shop(tmp_path_factory, redis_server, start_module_server):
    base = tmp_path_factory.mktemp("shop")
    pgs = []
    try:
        for name in ("orders", "inventory", "log"):
            pgs.append(PgServer(name))
    except RuntimeError as e:
        for p in pgs:
            p.stop()
        pytest.fail(str(e), pytrace=False)
    consumer = None
    try:
        setup_shop(*pgs, ITEMS)
        repo = base / "repo"
        r = subprocess.run(["/usr/bin/python3", str(EXAMPLE.parents[1] / "scripts" /
                                                     "gen_fraud_model.py"), str(repo)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        shutil.copytree(EXAMPLE / "recommend", repo / "recommend")
        srv = start_module_server(repo, "--redis", redis_server.addr, "--feedback-stream",
                                  f"redis://{redis_server.addr}/{FEEDBACK}")
        push = srv.post("/push", json={
            "push_source_name": "user_risk", "to": "online",
            "df": {"user_id": [42, 43, FRAUDSTER], "event_timestamp": [int(time.time())] * 3,
                   "account_age_days": [400, 30, 2], "chargebacks_90d": [0, 0, 5],
                   "orders_24h": [1, 2, 3]}})
        assert push.status_code == 200, push.text
        fspec = repo / "recommend" / "features.yaml"
        txn_yaml = write_txn_yaml(base / "txn.yaml", *pgs, prepare_timeout_ms=1000,
                                  gate_timeout_ms=500)
        log = open(base / "consumer.log", "wb")
        consumer = subprocess.Popen(
            [str(dais_binary()), "txn", "consume", "--redis", redis_server.addr,
             "--feature-spec", str(fspec), "--stream", STREAM, "--consumer", "c1",
             "--claim-idle-ms", "500"], stdout=log, stderr=subprocess.STDOUT)
        s = Shop(base, pgs, srv, redis_server, fspec, txn_yaml)
        s.consumer_log = base / "consumer.log"
        s.consumer = consumer
        yield s
    finally:
        if consumer:
            consumer.terminate()
            consumer.wait(timeout=30)
        for p in pgs:
            p.stop()


@pytest.fixture
def coord(shop):
    """Stops every coordinator a test started, then checks the invariants."""
    yield shop
    for t in shop.live:
        print(f"--- dais txn log ({t.log_path}, exit {t.proc.poll()}) ---\n{t.log_text()[-3000:]}")
        t.stop()
    shop.live.clear()


def applied_markers(shop, user):
    keys = shop.redis.call("KEYS", f"dais:shop:{{user_id={user}}}:user_purchases:v1:applied:*")
    return {k.decode().rsplit(":applied:", 1)[1] for k in keys}


def wait_events_applied(shop):
    """Every committed order's event is in the stream and applied by the consumer; refused orders
    have none; nothing left pending in the group."""
    have = {r[0]: r[1] for r in shop.orders.query("shop", "SELECT order_id, user_id FROM orders")}

    def done():
        evs = shop.events()
        by_order = {}
        for e in evs:
            payload = __import__("json").loads(e["payload"])
            by_order.setdefault(payload["order_id"], set()).add(e["event_id"])
        if set(by_order) != set(have):
            return False
        for order, ids in by_order.items():
            if len(ids) != 1 or not ids <= applied_markers(shop, have[order]):
                return False
        pending = shop.redis.call("XPENDING", STREAM, "recent-items")
        return pending[0] == 0

    wait_for(done, 30, "every committed order's event applied once, none pending")


def test_happy_path_commits_both_and_the_purchase_reaches_the_features(coord):
    shop = coord
    t = shop.coordinator()
    params = shop.order(user=42, item=1, quantity=2, amount=40.0)
    r = t.place(params)
    answered = time.monotonic()
    assert r.status_code == 200, r.text
    body = r.json()
    shop.record(params, r)
    assert body["outcome"] == "committed" and body["type"] == "place_order"
    assert 0 <= body["gate"]["score"] < 0.8 and body["gate"]["review"] is False
    # The enriched inference sees the purchase (the outbox relay, the stream, the consumer).
    wait_for(lambda: shop.recent_items(42)[0] == 1, 10, "item 1 first in user 42's recent items")
    visible_ms = (time.monotonic() - answered) * 1000
    print(f"commit-to-visible through relay, stream, consumer and L1 invalidation: "
          f"{visible_ms:.1f} ms")
    assert shop.recent_items(42)[1:] == [-1] * 7
    got = shop.orders.query("shop", "SELECT user_id, item_id, quantity FROM orders "
                                    "WHERE order_id = %s", (params["order_id"],))
    assert got == [(42, 1, 2)]
    # The outcome is in the decision log and readable back.
    look = requests.get(f"{t.url}/v1/txn/{body['txn_id']}", timeout=5).json()
    assert look["state"] == "committed" and look["answer"]["txn_id"] == body["txn_id"]
    assert requests.get(f"{t.url}/v1/txn/nosuch", timeout=5).status_code == 404
    assert requests.get(f"{t.url}/health/ready", timeout=5).status_code == 200
    # One process per coordinator id: `recover` refuses while this coordinator runs (it would
    # roll back what the coordinator has in flight).
    rec = subprocess.run([str(dais_binary()), "txn", "recover", "--config", str(shop.txn_yaml),
                          "--id", "shop-1", "--dry-run"], capture_output=True, text=True,
                         timeout=60)
    assert rec.returncode == 1 and "in use by another process" in rec.stderr, rec.stderr
    shop.invariants()
    wait_events_applied(shop)
    samples = parse_prometheus(t.metrics())
    assert metric_value(samples, "dais_txn_transactions_total", type="place_order",
                        outcome="committed") == 1
    assert metric_value(samples, "dais_txn_gate_decisions_total", type="place_order",
                        result="pass") == 1


def test_fraud_and_out_of_stock_are_refused_and_nothing_changes(coord):
    shop = coord
    t = shop.coordinator()
    params = shop.order(user=FRAUDSTER, item=2, quantity=1, amount=1500.0)
    r = t.place(params)
    shop.record(params, r)
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["outcome"] == "aborted" and body["reason"] == "gate_refused"
    assert body["gate"]["score"] > 0.8 and "fraud score" in body["error"]
    params = shop.order(user=43, item=3, quantity=5000)
    r = t.place(params)
    shop.record(params, r)
    assert r.status_code == 409, r.text
    assert r.json()["reason"] == "branch_failed"
    assert "inventory" in r.json()["error"] and "out of stock" in r.json()["error"]
    shop.invariants()
    stock = dict(shop.inventory.query("shop", "SELECT item_id, qty FROM stock"))
    assert stock[2] == ITEMS[2] - sum(q for (q,) in shop.orders.query(
        "shop", "SELECT quantity FROM orders WHERE item_id = 2"))
    samples = parse_prometheus(t.metrics())
    assert metric_value(samples, "dais_txn_aborts_total", type="place_order",
                        reason="gate_refused") == 1
    assert metric_value(samples, "dais_txn_aborts_total", type="place_order",
                        reason="branch_failed") == 1


def test_bad_requests_name_the_field_and_touch_no_database(coord):
    shop = coord
    t = shop.coordinator()
    before = shop.orders.query("shop", "SELECT count(*) FROM orders")
    logged = shop.log.query("coordinator", "SELECT count(*) FROM dais_txn_log")
    cases = [
        ("nosuch", {"a": 1}, 400, "unknown transaction type 'nosuch'"),
        ("place_order", {"order_id": "x", "user_id": 1, "item_id": 1, "quantity": 1}, 400,
         "'amount': missing"),
        ("place_order", {"order_id": "x", "user_id": "1", "item_id": 1, "quantity": 1,
                         "amount": 1}, 400, "'user_id': expected int"),
        ("place_order", {"order_id": "x", "user_id": 1, "item_id": 1, "quantity": 1, "amount": 1,
                         "sql": "DROP TABLE orders"}, 400, "'sql': not a parameter"),
    ]
    for type_, params, status, message in cases:
        r = t.place(params, type_=type_)
        assert r.status_code == status, r.text
        assert message in r.json()["error"], r.text
    r = requests.post(f"{t.url}/v1/txn/place_order", data="{not json", timeout=5)
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]
    assert shop.orders.query("shop", "SELECT count(*) FROM orders") == before
    assert shop.log.query("coordinator", "SELECT count(*) FROM dais_txn_log") == logged
    samples = parse_prometheus(t.metrics())
    assert metric_value(samples, "dais_txn_transactions_total", type="place_order",
                        outcome="bad_request") == 4


def test_idempotency_key_returns_the_first_outcome(coord):
    shop = coord
    t = shop.coordinator()
    params = shop.order(user=43, item=4, quantity=3)
    first = t.place(params, key="k-" + params["order_id"])
    assert first.status_code == 200, first.text
    shop.record(params, first)
    again = t.place(params, key="k-" + params["order_id"])
    assert again.status_code == 200 and again.json() == first.json()
    assert shop.orders.query("shop", "SELECT count(*) FROM orders WHERE order_id = %s",
                             (params["order_id"],)) == [(1,)]
    # A refused request's retry is refused the same way, without running again.
    bad = shop.order(user=43, item=4, quantity=99999)
    r1 = t.place(bad, key="k-" + bad["order_id"])
    r2 = t.place(bad, key="k-" + bad["order_id"])
    shop.record(bad, r1)
    assert r1.status_code == 409 and r2.status_code == 409 and r1.json() == r2.json()
    shop.invariants()


BUYER = """\
kind: agent
name: buyer
tenant: shop
trigger: {{http: true}}
redis: {redis}
capabilities: {{transactions: [place_order], streams: [bought]}}
steps:
  - name: order
    txn:
      type: place_order
      params: {{order_id: "${{event.order_id}}", user_id: "${{event.user|int}}",
               item_id: "${{event.item|int}}", quantity: "${{event.quantity|int}}",
               amount: "${{event.amount|number}}"}}
  - {{name: placed, branch: {{if: "${{order.outcome}} == committed"}}}}
  - {{name: tell, emit: {{stream: bought, fields: {{order: "${{event.order_id}}", txn: "${{order.txn_id}}"}}}}}}
"""


def test_an_agent_txn_step_places_the_order_once_per_run(coord, tmp_path):
    """Issue 38: an agent's txn step calls this coordinator with Idempotency-Key
    <agent>:<run>:<step>; the client's retry of the HTTP trigger (same key, so the same run id)
    places nothing twice; a refusal is the step's outcome, which the agent branches on."""
    shop = coord
    t = shop.coordinator()
    spec = tmp_path / "buyer.yaml"
    spec.write_text(BUYER.format(redis=shop.redis.addr))
    log = tmp_path / "buyer.log"
    rt = subprocess.Popen([str(dais_binary()), "agent", "run", "-f", str(spec), "--gateway",
                           shop.srv.url, "--txn-url", t.url, "--consumer", "a1"],
                          stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        port = wait_for(lambda: re.search(r"ports: metrics=(\d+)", log.read_text()), 20,
                        "the agent's port").group(1)
        url = f"http://127.0.0.1:{port}/v1/agents/buyer/runs"
        params = shop.order(user=42, item=5, quantity=2, amount=40.0)
        # Stream-like text fields, converted by the references (|int, |number).
        event = {"order_id": params["order_id"], "user": "42", "item": "5", "quantity": "2",
                 "amount": "40"}
        first = requests.post(url, json=event, headers={"Idempotency-Key": "buy-1"}, timeout=30)
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["outcome"] == "completed", body
        assert body["context"]["order"]["outcome"] == "committed"
        shop.accepted.add(params["order_id"])
        again = requests.post(url, json=event, headers={"Idempotency-Key": "buy-1"}, timeout=30)
        assert again.status_code == 200, again.text
        assert again.json()["context"]["order"]["txn_id"] == body["context"]["order"]["txn_id"]
        assert again.json()["trace"]["steps"][-1]["outcome"] == "duplicate"
        assert shop.orders.query("shop", "SELECT count(*) FROM orders WHERE order_id = %s",
                                 (params["order_id"],)) == [(1,)]
        assert len(shop.redis.call("XRANGE", "bought", "-", "+")) == 1
        # Out of stock: refused by the coordinator, the run stops at the branch.
        bad = shop.order(user=42, item=5, quantity=99999)
        r = requests.post(url, json={**event, "order_id": bad["order_id"], "quantity": "99999"},
                          timeout=30)
        assert r.status_code == 200 and r.json()["outcome"] == "stopped", r.text
        assert r.json()["context"]["order"]["reason"] == "branch_failed"
        shop.refused.add(bad["order_id"])
        # A value the conversion cannot make an integer fails the run naming the reference.
        r = requests.post(url, json={**event, "item": "five"}, timeout=30)
        assert r.status_code == 422 and "${event.item|int}: 'five' is not a number" \
            in r.json()["error"], r.text
        shop.invariants()
    finally:
        rt.kill()
        rt.wait(10)


def test_prepare_timeout_when_a_participant_freezes(coord):
    shop = coord
    t = shop.coordinator()
    warm = shop.order(item=5)
    shop.record(warm, t.place(warm))  # connections open before the freeze
    shop.inventory.freeze()
    try:
        params = shop.order(user=42, item=5)
        start = time.monotonic()
        r = t.place(params)
        took = time.monotonic() - start
        shop.record(params, r)
        assert r.status_code == 504, r.text
        assert r.json()["reason"] == "prepare_timeout" and "inventory" in r.json()["error"]
        assert took < 3.0, f"answered after {took:.2f} s"
    finally:
        shop.inventory.thaw()
    # The orders branch was rolled back at once; the frozen one when its socket closes.
    wait_for(lambda: shop.inventory.prepared("shop") == [] and shop.orders.prepared("shop") == [],
             30, "no prepared transaction left")
    after = shop.order(item=5)

    def placed():  # the thawed server catches up first
        r = t.place(after)
        shop.record(after, r)
        return r.status_code == 200
    wait_for(placed, 30, "an order placed after the thaw", interval=0.2)
    shop.invariants()


def test_gate_down_applies_the_policy(coord):
    shop = coord
    closed = f"127.0.0.1:{__import__('conftest').free_port()}"
    t = shop.coordinator(gate=closed)
    refused = shop.order(item=6)
    r = t.place(refused)
    shop.record(refused, r)
    assert r.status_code == 503 and r.json()["reason"] == "gate_unavailable", r.text
    allowed = shop.order(item=6)
    r = t.place(allowed, type_="place_order_allow")
    shop.record(allowed, r)
    assert r.status_code == 200, r.text
    assert r.json()["gate"]["review"] is True
    samples = parse_prometheus(t.metrics())
    assert metric_value(samples, "dais_txn_gate_decisions_total", type="place_order",
                        result="error_refused") == 1
    assert metric_value(samples, "dais_txn_gate_decisions_total", type="place_order_allow",
                        result="error_allowed") == 1
    shop.invariants()


def test_gate_slow_model_server_is_bounded_by_its_timeout(coord):
    shop = coord
    t = shop.coordinator()
    shop.srv.proc.send_signal(signal.SIGSTOP)  # the model server hangs (connections stay open)
    try:
        params = shop.order(item=6)
        start = time.monotonic()
        r = t.place(params)
        took = time.monotonic() - start
        shop.record(params, r)
    finally:
        shop.srv.proc.send_signal(signal.SIGCONT)
    assert r.status_code == 503 and r.json()["reason"] == "gate_unavailable", r.text
    assert "no answer within 500 ms" in r.json()["error"]
    assert took < 3.0, f"answered after {took:.2f} s"
    shop.invariants()


@pytest.mark.parametrize("step", ["after_branches", "after_prepare", "after_decision",
                                  "during_commit"])
def test_coordinator_killed_at_each_step_recovers(coord, step):
    shop = coord
    t = shop.coordinator("--crash-at", step)
    params = shop.order(user=43, item=7, quantity=1)
    try:
        r = t.place(params, timeout=10)
        status = r.status_code
    except requests.RequestException:
        status = None  # killed before answering
    assert t.wait_exit(30) == -9
    committed = step in ("after_decision", "during_commit")
    if step == "during_commit":
        assert status == 200  # answered before the commit phase
    else:
        assert status is None
    # The restarted coordinator resolves from the log: commit where decided, else roll back.
    t2 = shop.coordinator()
    wait_for(lambda: shop.orders.prepared("shop") == [] and shop.inventory.prepared("shop") == [],
             30, "recovery resolved every prepared transaction")
    (shop.accepted if committed else shop.refused).add(params["order_id"])
    shop.invariants()
    assert "txn recovery:" in t2.log_text()
    wait_events_applied(shop)


def test_participant_down_after_the_decision_is_committed_when_back(coord):
    shop = coord
    t = shop.coordinator("--crash-at", "during_commit")
    params = shop.order(user=43, item=8, quantity=2)
    r = t.place(params)
    assert r.status_code == 200, r.text
    shop.accepted.add(params["order_id"])
    assert t.wait_exit(30) == -9
    # Orders committed; inventory still holds the prepared transaction. Kill it too.
    assert len(shop.inventory.prepared("shop")) == 1
    shop.inventory.kill()
    t2 = shop.coordinator()

    def in_doubt():
        s = parse_prometheus(t2.metrics())
        return (metric_value(s, "dais_txn_in_doubt_transactions") or 0) >= 1
    wait_for(in_doubt, 20, "the decided transaction counted in doubt while inventory is down")
    # A participant down does not make the coordinator unready (other work goes on).
    assert requests.get(f"{t2.url}/health/ready", timeout=5).status_code == 200
    shop.inventory.start()
    wait_for(lambda: shop.inventory.prepared("shop") == [], 30, "committed when back")
    shop.invariants()
    wait_for(lambda: (metric_value(parse_prometheus(t2.metrics()),
                                   "dais_txn_in_doubt_transactions") or 0) == 0,
             20, "in doubt back to 0")


def test_recover_dry_run_shows_and_changes_nothing(coord):
    shop = coord
    t = shop.coordinator("--crash-at", "after_prepare")
    params = shop.order(user=43, item=9)
    with pytest.raises(requests.RequestException):
        r = t.place(params)
        print("unexpected answer", r.status_code, r.text)
    assert t.wait_exit(30) == -9
    shop.refused.add(params["order_id"])
    gids = shop.orders.prepared("shop")
    assert len(gids) == 1
    cmd = [str(dais_binary()), "txn", "recover", "--config", str(shop.txn_yaml), "--id", "shop-1"]
    dry = subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "rollback" in dry.stdout and gids[0] in dry.stdout and "dry run" in dry.stdout
    assert shop.orders.prepared("shop") == gids
    real = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert real.returncode == 0 and "rollback" in real.stdout, real.stdout + real.stderr
    shop.invariants()


def test_duplicate_event_is_applied_once_and_a_dead_consumer_is_taken_over(coord):
    shop = coord
    t = shop.coordinator()
    user = 77
    for item in (1, 2):
        p = shop.order(user=user, item=item)
        r = t.place(p)
        assert r.status_code == 200, r.text
        shop.record(p, r)
        wait_for(lambda: shop.recent_items(user)[0] == item, 10, f"item {item} first")
    first = [e for e in shop.events() if '"user_id":"77"' in e["payload"]][0]
    # The relay publishing item 1's event again (a restart between XADD and DELETE): applying it
    # twice would move item 1 back to the front.
    shop.redis.call("XADD", STREAM, "*", "event_id", first["event_id"], "txn_id",
                    first["txn_id"], "payload", first["payload"])
    # A consumer that read an entry and died before acknowledging it: with the live consumer
    # paused (and no longer blocked in XREADGROUP), "dead" takes the next event and never acks.
    shop.consumer.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: not any(b" flags=b " in line for line in
                                 shop.redis.call("CLIENT", "LIST").splitlines()), 10,
                 "the paused consumer's blocking read expired")
        p = shop.order(user=user, item=3)
        r = t.place(p)
        assert r.status_code == 200
        shop.record(p, r)
        got = wait_for(lambda: shop.redis.call("XREADGROUP", "GROUP", "recent-items", "dead",
                                               "COUNT", "10", "STREAMS", STREAM, ">"),
                       10, "the dead consumer got the event")
        assert len(got[0][1]) == 1
    finally:
        shop.consumer.send_signal(signal.SIGCONT)
    # XAUTOCLAIM (--claim-idle-ms 500) hands it to the live consumer.
    wait_for(lambda: shop.recent_items(user)[:3] == [3, 2, 1], 15, "items 3, 2, 1 in order")
    assert shop.recent_items(user)[:3] == [3, 2, 1]
    wait_events_applied(shop)


def _pb(fields) -> bytes:
    """A protobuf message of string fields {number: text} (the test has no generated stubs)."""
    out = b""
    for num, text in fields.items():
        v = text.encode()
        n, size = len(v), b""
        while True:
            size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                break
        out += bytes([num << 3 | 2]) + size + v
    return out


def _unpb(data: bytes) -> dict:
    fields, i = {}, 0
    while i < len(data):
        key = data[i]
        i += 1
        n = shift = 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        fields[key >> 3] = data[i:i + n].decode()
        i += n
    return fields


def test_grpc_api_places_refuses_and_gets(coord):
    import grpc
    import json
    shop = coord
    t = shop.coordinator()
    with grpc.insecure_channel(f"127.0.0.1:{t.grpc_port}") as ch:
        place = ch.unary_unary("/dais.txn.v1.Transactions/Place",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
        get = ch.unary_unary("/dais.txn.v1.Transactions/Get",
                             request_serializer=lambda b: b, response_deserializer=lambda b: b)
        params = shop.order(user=42, item=10, quantity=1)
        ok = _unpb(place(_pb({1: "place_order", 2: json.dumps(params), 3: "g-" +
                             params["order_id"]}), timeout=10))
        shop.accepted.add(params["order_id"])
        assert ok[2] == "committed" and json.loads(ok[5])["txn_id"] == ok[1]
        again = _unpb(place(_pb({1: "place_order", 2: json.dumps(params), 3: "g-" +
                                params["order_id"]}), timeout=10))
        assert again == ok
        got = _unpb(get(_pb({1: ok[1]}), timeout=10))
        assert got[1] == ok[1] and got[2] == "committed"
        bad = shop.order(user=42, item=10, quantity=99999)
        with pytest.raises(grpc.RpcError) as e:
            place(_pb({1: "place_order", 2: json.dumps(bad)}), timeout=10)
        shop.refused.add(bad["order_id"])
        assert e.value.code() == grpc.StatusCode.ABORTED
        assert e.value.details().startswith("branch_failed: branch inventory: out of stock")
        with pytest.raises(grpc.RpcError) as e:
            place(_pb({1: "place_order", 2: '{"order_id": 1}'}), timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'order_id': expected string" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            get(_pb({1: "nosuch"}), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        # Issue 32: keys are bytes with a length; one with a NUL was cut there and shared K's
        # answer. Refused now.
        nul = shop.order(user=42, item=10, quantity=1)
        with pytest.raises(grpc.RpcError) as e:
            place(_pb({1: "place_order", 2: json.dumps(nul), 3: "g-\x00" + nul["order_id"]}),
                  timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "contains a NUL byte" in e.value.details(), e.value.details()
    shop.invariants()


def feedback_records(shop) -> list[dict]:
    import json
    return [json.loads(dict(zip(f[0::2], f[1::2]))[b"record"])
            for _, f in shop.redis.call("XRANGE", FEEDBACK, "-", "+")]


def test_trace_context_reaches_the_gate_the_events_and_the_collector(coord):
    """Issue 35: a caller's traceparent and request id go on to the gate's model call (the model
    server's feedback record), into the outbox events, and the transaction's span (child of the
    caller's) to the collector; without a context a new trace, not sampled by default."""
    import json
    import re
    shop = coord
    collector = Collector()
    try:
        t = shop.coordinator("--otlp-endpoint", f"http://127.0.0.1:{collector.port}")
        trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        params = shop.order(user=43, item=3, quantity=1)
        r = requests.post(f"{t.url}/v1/txn/place_order", json=params, timeout=10,
                          headers={"traceparent": f"00-{trace}-{parent}-01",
                                   "x-request-id": "checkout-7"})
        shop.record(params, r)
        assert r.status_code == 200 and r.headers["x-request-id"] == "checkout-7", r.text
        txn_id = r.json()["txn_id"]
        spans = wait_for(lambda: [s for s in collector.spans if s["traceId"] == trace], 20,
                         "the transaction's span at the collector")
        assert not collector.bad, collector.bad
        (span,) = spans
        assert span["service"] == "dais-txn" and span["name"] == "txn place_order"
        assert span["parentSpanId"] == parent and re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        assert attrs["dais.txn.id"] == {"stringValue": txn_id}
        assert attrs["dais.request_id"] == {"stringValue": "checkout-7"}
        assert attrs["http.response.status_code"] == {"intValue": "200"}
        # The gate's ModelInfer carried the trace (its parent: the transaction's span) and the
        # request id, which the model server recorded.
        recs = wait_for(lambda: [x for x in feedback_records(shop) if x.get("trace_id") == trace],
                        20, "the gate's call in the model server's feedback")
        assert [x["id"] for x in recs] == ["checkout-7"], recs
        # The order's event carries the context on to the stream's consumers.
        events = wait_for(lambda: [e for e in shop.events()
                                   if json.loads(e["payload"])["order_id"] == params["order_id"]],
                          20, "the order's event in the stream")
        assert [e["traceparent"] for e in events] == [f"00-{trace}-{span['spanId']}-01"]
        # No context: a new trace (its id answered as the request id), not sampled by default.
        other = shop.order(user=43, item=3, quantity=1)
        r = t.place(other)
        shop.record(other, r)
        assert r.status_code == 200 and re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])
        new_trace = r.headers["x-request-id"]
        ev = wait_for(lambda: [e for e in shop.events()
                               if json.loads(e["payload"])["order_id"] == other["order_id"]],
                      20, "the second order's event")
        assert re.fullmatch(rf"00-{new_trace}-[0-9a-f]{{16}}-00", ev[0]["traceparent"])
        # A gRPC caller's metadata is continued too.
        import grpc
        with grpc.insecure_channel(f"127.0.0.1:{t.grpc_port}") as ch:
            place = ch.unary_unary("/dais.txn.v1.Transactions/Place",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
            third = shop.order(user=43, item=3, quantity=1)
            grpc_trace = "6" * 32
            _, call = place.with_call(
                _pb({1: "place_order", 2: json.dumps(third)}), timeout=10,
                metadata=(("traceparent", f"00-{grpc_trace}-{parent}-01"),
                          ("x-request-id", "grpc-9")))
            shop.accepted.add(third["order_id"])
            assert ("x-request-id", "grpc-9") in call.initial_metadata()
        wait_for(lambda: any(s["traceId"] == grpc_trace for s in collector.spans), 20,
                 "the gRPC transaction's span")
        assert not any(s["traceId"] == new_trace for s in collector.spans)
    finally:
        collector.stop()
    shop.invariants()


def test_an_outbox_from_before_tracing_gains_its_column(coord):
    """An outbox table made by a version without traceparent is altered at start (when no
    prepared transaction holds it) and its events carry the trace from then on."""
    shop = coord
    column = ("SELECT count(*) FROM information_schema.columns WHERE table_name = 'dais_outbox'"
              " AND column_name = 'traceparent'")
    for pg in (shop.orders, shop.inventory):
        pg.execute("shop", "ALTER TABLE dais_outbox DROP COLUMN IF EXISTS traceparent")
        assert pg.query("shop", column) == [(0,)]
    t = shop.coordinator()
    for pg in (shop.orders, shop.inventory):
        assert pg.query("shop", column) == [(1,)]
    params = shop.order(user=42, item=4, quantity=1)
    r = t.place(params)
    shop.record(params, r)
    assert r.status_code == 200, r.text
    wait_events_applied(shop)
    shop.invariants()


def test_ready_follows_the_decision_log(coord):
    shop = coord
    t = shop.coordinator()

    def ready():
        return requests.get(f"{t.url}/health/ready", timeout=5).status_code
    assert ready() == 200
    shop.log.kill()
    try:
        wait_for(lambda: ready() == 503, 20, "not ready while the decision log is down")
        params = shop.order(item=4)
        r = t.place(params)
        shop.record(params, r)
        assert r.status_code == 503 and r.json()["reason"] == "log_unavailable", r.text
    finally:
        shop.log.start()
    wait_for(lambda: ready() == 200, 30, "ready again once the log is back")
    after = shop.order(item=4)

    def placed():
        r = t.place(after)
        shop.record(after, r)
        return r.status_code == 200
    wait_for(placed, 30, "an order placed once the log is back", interval=0.2)
    shop.invariants()


def test_tls_api_and_gate_over_tls(coord, start_server, tmp_path):
    """dais txn with TLS (issue 17): its HTTP API over HTTPS, and the gate calling a model server
    that only speaks gRPC over TLS (--gate-tls-ca); a gate without the CA cannot reach it and
    the order is refused as gate_unavailable, never committed."""
    shop = coord
    certs = make_certs(tmp_path / "certs")
    tls_model_server = start_server(
        shop.srv.repo, "--redis", shop.redis.addr, "--grpc-use-ssl", "true",
        "--grpc-server-cert", certs / "server.crt", "--grpc-server-key", certs / "server.key")
    gate = f"localhost:{tls_model_server.grpc_port}"
    https = ["--http-use-ssl", "true", "--http-server-cert", certs / "server.crt",
             "--http-server-key", certs / "server.key"]
    t = shop.coordinator(*https, "--gate-tls-ca", certs / "ca.crt", gate=gate)
    params = shop.order(user=42, item=2, quantity=1, amount=30.0)
    r = requests.post(f"https://localhost:{t.port}/v1/txn/place_order", json=params, timeout=30,
                      verify=str(certs / "ca.crt"))
    shop.record(params, r)
    assert r.status_code == 200 and r.json()["outcome"] == "committed", r.text
    assert r.json()["gate"]["review"] is False  # scored by the model over TLS
    t.stop()
    shop.live.remove(t)

    untrusting = shop.coordinator(*https, gate=gate)  # no CA: plain text to a TLS port
    params = shop.order(user=43, item=2, quantity=1, amount=30.0)
    r = requests.post(f"https://localhost:{untrusting.port}/v1/txn/place_order", json=params,
                      timeout=30, verify=str(certs / "ca.crt"))
    shop.record(params, r)
    assert r.status_code != 200 and "gate_unavailable" in r.text, r.text


def test_a_database_restart_costs_no_order(coord):
    """Issue 31: after `pg_ctl restart` of a participant or of the decision log the next
    --workers orders were refused 503 (participant_unavailable / log_unavailable) on dead
    connections. Now every order placed once the database accepts connections commits, in
    sequence and concurrently, keyed and unkeyed; in doubt counts stay at 0."""
    from concurrent.futures import ThreadPoolExecutor
    shop = coord
    t = shop.coordinator()
    for _ in range(4):  # every worker has its connections
        params = shop.order(item=9)
        r = t.place(params)
        shop.record(params, r)
        assert r.status_code == 200, r.text

    def place_one(i):
        params = shop.order(item=9)
        r = t.place(params, key=f"restart-{uuid.uuid4().hex[:8]}" if i % 2 else None)
        shop.record(params, r)
        return r.status_code, r.text

    for db in (shop.inventory, shop.log, shop.orders):
        db.restart()
        sequential = [place_one(i) for i in range(10)]
        assert all(code == 200 for code, _ in sequential), (db.name, sequential)
        db.restart()
        with ThreadPoolExecutor(8) as pool:
            concurrent = list(pool.map(place_one, range(24)))
        assert all(code == 200 for code, _ in concurrent), (db.name, concurrent)
    s = parse_prometheus(t.metrics())
    assert (metric_value(s, "dais_txn_in_doubt_transactions") or 0) == 0
    assert metric_value(s, "dais_txn_unmarked_commits_transactions") is not None
    shop.invariants()


def test_in_doubt_counts_only_what_may_be_prepared(coord):
    """Issue 31: dais_txn_in_doubt_transactions read 46-75 while 1-4 transactions were prepared:
    every commit decision not yet marked done counted while a participant could not be asked.
    Commits this coordinator saw applied everywhere are not in doubt; they are
    dais_txn_unmarked_commits_transactions until the resolver marks them."""
    shop = coord
    t = shop.coordinator()
    unmarked = []
    try:
        for _ in range(5):
            params = shop.order(item=10)
            r = t.place(params)
            shop.record(params, r)
            assert r.status_code == 200, r.text
            # The answer comes before COMMIT PREPARED: wait until it ran everywhere.
            wait_for(lambda: shop.inventory.prepared("shop") == [] and
                     shop.orders.prepared("shop") == [], 10, "committed on both participants")
            shop.inventory.freeze()  # no resolver pass can mark it done while frozen
            unmarked = shop.log.query("coordinator", "SELECT txn_id FROM dais_txn_log WHERE "
                                      "state = 'commit' AND coordinator = 'shop-1'")
            if unmarked:
                break
            shop.inventory.thaw()  # a pass marked it in between: again
        assert unmarked, "never caught a commit before the resolver marked it done"

        def passed_while_frozen():
            s = parse_prometheus(t.metrics())
            return (metric_value(s, "dais_txn_unmarked_commits_transactions") or 0) >= 1 and s
        s = wait_for(passed_while_frozen, 30, "a resolver pass with inventory frozen")
        assert (metric_value(s, "dais_txn_in_doubt_transactions") or 0) == 0, \
            "committed everywhere, yet counted in doubt"
    finally:
        shop.inventory.thaw()
    wait_for(lambda: (metric_value(parse_prometheus(t.metrics()),
                                   "dais_txn_unmarked_commits_transactions") or 0) == 0,
             30, "marked done once inventory answers")
    shop.invariants()


def test_keyed_answers_final_or_not_as_documented(coord):
    """Issue 31: docs/transactions.md promised "the first answer byte for byte" while a keyed
    log_unavailable refusal was followed by a commit on retry. The docs now say which answers
    are final; this holds them to it, and to the GET /v1/txn/<id> states they list."""
    shop = coord
    t = shop.coordinator()
    # Final: a refusal recorded against the key (out of stock) comes back byte for byte.
    params = shop.order(item=10, quantity=100000)
    first = t.place(params, key="final-1")
    shop.record(params, first)
    assert first.status_code == 409 and first.json()["reason"] == "branch_failed", first.text
    again = t.place(params, key="final-1")
    assert (again.status_code, again.content) == (first.status_code, first.content)
    look = requests.get(f"{t.url}/v1/txn/{first.json()['txn_id']}", timeout=5).json()
    assert look["state"] == "aborted" and look["answer"] == first.json(), look
    # Not final: with the decision log down nothing holds the key; the retry runs and commits.
    params = shop.order(item=10)
    shop.log.kill()
    try:
        down = t.place(params, key="not-final-1")
        assert down.status_code == 503 and down.json()["reason"] == "log_unavailable", down.text
    finally:
        shop.log.start()
    retry = t.place(params, key="not-final-1")
    shop.record(params, retry)
    assert retry.status_code == 200, retry.text
    look = requests.get(f"{t.url}/v1/txn/{retry.json()['txn_id']}", timeout=5)
    assert look.status_code == 200 and look.json()["state"] == "committed", \
        (look.status_code, look.text)
    assert t.place(params, key="not-final-1").content == retry.content
    shop.invariants()


def test_two_participants_on_one_server_commit(coord, tmp_path):
    """Issue 32: two participants that are databases of one PostgreSQL server got the same
    prepared-transaction id (unique per server) and every transaction failed "already in use".
    Each participant now has its own gid."""
    import yaml
    shop = coord
    shop.orders.create_db("inv_shared", EXAMPLE / "schema_inventory.sql")
    with shop.orders.connect("inv_shared") as c, c.cursor() as cur:
        cur.execute("INSERT INTO stock (item_id, qty) VALUES (1, 10)")
    spec = yaml.safe_load(open(shop.txn_yaml).read())
    spec["participants"]["inventory"] = shop.orders.conninfo("inv_shared")
    shared = tmp_path / "shared.yaml"
    shared.write_text(yaml.safe_dump(spec))
    t = shop.coordinator(config=str(shared))
    params = shop.order(item=1, quantity=2)
    r = t.place(params, type_="place_order_nogate")
    assert r.status_code == 200, r.text
    assert shop.orders.query("inv_shared", "SELECT qty FROM stock WHERE item_id = 1") == [(8,)]
    assert shop.orders.query("shop", "SELECT count(*) FROM orders WHERE order_id = %s",
                             (params["order_id"],)) == [(1,)]
    assert shop.orders.prepared("shop") == [] and shop.orders.prepared("inv_shared") == []
    # Leave the shared shop as it was for the module's invariants.
    shop.orders.execute("shop", "DELETE FROM orders WHERE order_id = %s", (params["order_id"],))
