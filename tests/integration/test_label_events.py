"""Issue 33, part 2: labels fed by events. `dais label-events` reads an event stream in the shape
`dais txn`'s outbox relay writes (event_id, txn_id, payload JSON) through a consumer group and
appends one label per event to the label stream; events it cannot read are acknowledged and
skipped with the reason; a second run finds nothing left. Real redis-server."""

from __future__ import annotations

import json
import subprocess


def label_events(dais_bin, redis_server, *args):
    return subprocess.run([str(dais_bin), "label-events", "--redis", redis_server.addr,
                           "--label-stream", f"redis://{redis_server.addr}/labels", "--drain",
                           "--consumer", "t1", *args], capture_output=True, text=True, timeout=60)


def entries(redis_server, stream):
    out = []
    for entry_id, kv in redis_server.call("XRANGE", stream, "-", "+"):
        out.append({k.decode(): v.decode() for k, v in zip(kv[::2], kv[1::2])})
    return out


def test_committed_orders_become_purchase_labels_and_chargebacks_fraud_labels(redis_server,
                                                                              dais_bin):
    for i in range(20):
        payload = json.dumps({"order_id": f"o-{i}", "user_id": 100 + i, "item_id": i % 5})
        redis_server.call("XADD", "shop:purchases", "*", "event_id", f"orders:{i}", "txn_id",
                          f"t-{i}", "payload", payload)
    redis_server.call("XADD", "shop:purchases", "*", "event_id", "orders:x", "txn_id", "t-x",
                      "payload", json.dumps({"order_id": "o-x"}))  # no user_id
    r = label_events(dais_bin, redis_server, "--stream", "shop:purchases", "--label", "purchase",
                     "--entity-field", "payload.user_id", "--source", "orders")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "21 events, 20 labels, 1 skipped" in r.stderr, r.stderr
    assert "payload.user_id: missing" in r.stderr, r.stderr
    labels = entries(redis_server, "labels")
    assert len(labels) == 20
    assert [json.loads(l["entity_ids"]) for l in labels] == [[str(100 + i)] for i in range(20)]
    assert all(json.loads(l["labels"]) == {"purchase": 1} and l["source"] == "orders"
               for l in labels), labels[0]
    # The label's time is the event's (its stream id), not when it was labelled.
    first_id = redis_server.call("XRANGE", "shop:purchases", "-", "+", "COUNT", "1")[0][0]
    assert labels[0]["time_ms"] == first_id.decode().split("-")[0]
    assert redis_server.call("XPENDING", "shop:purchases", "labels")[0] == 0
    # Everything was acknowledged: a second run labels nothing again.
    r = label_events(dais_bin, redis_server, "--stream", "shop:purchases", "--label", "purchase",
                     "--entity-field", "payload.user_id", "--source", "orders")
    assert r.returncode == 0 and "0 events, 0 labels" in r.stderr, r.stderr
    assert len(entries(redis_server, "labels")) == 20

    # Chargebacks confirm fraud by request id, value and time from the event.
    redis_server.call("XADD", "chargebacks", "*", "event_id", "cb:1", "payload",
                      json.dumps({"request_id": "tx-7", "confirmed": True,
                                  "time_ms": 1796400000000}))
    r = label_events(dais_bin, redis_server, "--stream", "chargebacks", "--label", "fraud",
                     "--request-id-field", "payload.request_id", "--value-field",
                     "payload.confirmed", "--time-field", "payload.time_ms", "--source",
                     "chargebacks")
    assert r.returncode == 0, r.stderr
    last = entries(redis_server, "labels")[-1]
    assert last["request_id"] == "tx-7" and json.loads(last["labels"]) == {"fraud": 1}, last
    assert last["time_ms"] == "1796400000000"

    # A rule that names nothing judged: refused before anything is read.
    r = label_events(dais_bin, redis_server, "--stream", "chargebacks", "--label", "fraud",
                     "--source", "x")
    assert r.returncode == 2 and "--request-id-field or --entity-field" in r.stderr, r.stderr
