"""Issue 35: W3C trace context and request ids from a client through the gateway to the node's
feedback record and the gateway's access log, and the gateway's spans exported over OTLP/HTTP
JSON to a collector (a small receiver in the test). Real etcd, redis, node and gateway."""

from __future__ import annotations

import json
import re

import pytest
import requests

from cluster_util import TTL, Gateway, instances
from conftest import redis_call, wait_for
from otlp_collector import Collector

BODY = {"inputs": [{"name": "INPUT__0", "shape": [1, 16], "datatype": "FP32",
                    "data": [0.0] * 16}]}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def traced(etcd_server, start_server, model_repo, redis_server, dais_bin, tmp_path):
    collector = Collector()
    start_server(model_repo, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                 "--lease-ttl-secs", str(TTL), "--feedback-stream",
                 f"redis://127.0.0.1:{redis_server.port}/trace:feedback",
                 "--otlp-endpoint", f"http://127.0.0.1:{collector.port}", command="node")
    etcd_server.ctl("put", "/dais/assignments/n1/mlp_small", json.dumps(
        {"deployment": "ranker", "model": "mlp_small", "version": 1}))
    wait_for(lambda: instances(etcd_server, "mlp_small").get("n1", {}).get("state") == "READY",
             60, "mlp_small READY on n1")
    access_log = tmp_path / "access.log"
    gw = Gateway(dais_bin, etcd_server, tmp_path, "--otlp-endpoint",
                 f"http://127.0.0.1:{collector.port}", "--trace-sample-rate", "0",
                 "--access-log", str(access_log))
    url = gw.url + "/v2/models/mlp_small/infer"
    wait_for(lambda: requests.post(url, json=BODY, timeout=5).status_code == 200, 20,
             "the gateway serving mlp_small")
    yield {"url": url, "collector": collector, "access_log": access_log, "gateway": gw,
           "redis": redis_server}
    gw.stop()
    collector.stop()


def feedback(port):
    """The feedback stream's records (XRANGE: no wait for entries that will not come)."""
    out = []
    for _, fields in redis_call(port, "XRANGE", "trace:feedback", "-", "+"):
        values = dict(zip(fields[::2], fields[1::2]))
        raw = values.get(b"record", values.get("record"))
        out.append(json.loads(raw))
    return out


def test_a_traced_request_is_followed_to_the_node_and_exported(traced, dais_bin):
    r = requests.post(traced["url"], json=BODY, timeout=10,
                      headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == TRACE  # none given: the trace id
    # The gateway's span, child of the client's, exported to the collector.
    collector = traced["collector"]
    spans = wait_for(lambda: [s for s in collector.spans if s["traceId"] == TRACE
                              and s["service"] == "dais-gateway"], 20,
                     "the gateway's span at the collector")
    assert not collector.bad, collector.bad
    (span,) = spans
    assert span["parentSpanId"] == PARENT and re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
    assert span["service"] == "dais-gateway" and span["status"]["code"] == 1
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    assert attrs["http.response.status_code"] == {"intValue": "200"}
    assert attrs["dais.node"] == {"stringValue": "n1"}
    assert int(span["endTimeUnixNano"]) > int(span["startTimeUnixNano"]) > 0
    # The node saw the trace (its parent: the gateway's span) and the request id.
    records = wait_for(lambda: [rec for rec in feedback(traced["redis"].port)
                                if rec.get("trace_id") == TRACE], 20, "the feedback record")
    assert len(records) == 1 and records[0]["id"] == TRACE, records
    log = [json.loads(line) for line in traced["access_log"].read_text().splitlines()]
    entry = next(e for e in log if e["trace_id"] == TRACE)
    assert entry["span_id"] == span["spanId"] and entry["request_id"] == TRACE
    # The node's span, child of the gateway's.
    (node_span,) = wait_for(lambda: [s for s in collector.spans if s["traceId"] == TRACE
                                     and s["service"] == "dais-node"], 20, "the node's span")
    assert node_span["parentSpanId"] == span["spanId"] and node_span["name"] == "infer mlp_small"
    assert int(span["startTimeUnixNano"]) <= int(node_span["startTimeUnixNano"])
    assert int(node_span["endTimeUnixNano"]) <= int(span["endTimeUnixNano"])
    attrs = {a["key"]: a["value"] for a in node_span["attributes"]}
    assert attrs["dais.node"] == {"stringValue": "n1"}
    assert attrs["dais.version"] == {"stringValue": "1"}
    assert attrs["dais.request_id"] == {"stringValue": TRACE}
    assert attrs["dais.status"] == {"stringValue": "OK"} and node_span["status"]["code"] == 1


def test_request_ids_and_unsampled_or_malformed_traces(traced, dais_bin):
    r = requests.post(traced["url"], json=BODY, timeout=10,
                      headers={"x-request-id": "order-17",
                               "traceparent": f"00-{TRACE.upper()}-{PARENT}-01"})  # malformed
    assert r.status_code == 200 and r.headers["x-request-id"] == "order-17", r.headers
    log = [json.loads(line) for line in traced["access_log"].read_text().splitlines()]
    entry = next(e for e in log if e["request_id"] == "order-17")
    new_trace = entry["trace_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", new_trace) and new_trace != TRACE.lower()
    mine = wait_for(lambda: [rec for rec in feedback(traced["redis"].port)
                             if rec["id"] == "order-17"], 20, "the feedback record")
    assert len(mine) == 1 and mine[0]["trace_id"] == new_trace, mine
    # Not sampled (no traceparent to continue, --trace-sample-rate 0): no span. A sampled
    # request after it is exported, so by then the unsampled one would have been too.
    requests.post(traced["url"], json=BODY, timeout=10,
                  headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
    wait_for(lambda: any(s["traceId"] == TRACE for s in traced["collector"].spans), 20,
             "the sampled span")
    assert not any(s["traceId"] == new_trace for s in traced["collector"].spans)
    # An unsampled traceparent (flags 00) is continued but not exported.
    other = "5" * 32
    r = requests.post(traced["url"], json=BODY, timeout=10,
                      headers={"traceparent": f"00-{other}-{PARENT}-00"})
    assert r.status_code == 200 and r.headers["x-request-id"] == other


def test_standalone_serve_exports_spans_for_grpc_and_new_traces(start_server, model_repo,
                                                                tmp_path):
    """`dais serve --otlp-endpoint`: a gRPC call's traceparent metadata is continued in the
    node's span; with --trace-sample-rate 1 a request without one starts a sampled trace; a
    request the server refuses (unknown model) is a span too, not marked as the server's
    error."""
    import grpc_client
    collector = Collector()
    try:
        srv = start_server(model_repo, "--otlp-endpoint", f"http://127.0.0.1:{collector.port}",
                           "--trace-sample-rate", "1")
        g = grpc_client.GrpcClient(grpc_client.generate_stubs(tmp_path / "stubs"), srv.grpc_port)
        req = g.request("mlp_small", {"INPUT__0": [[0.0] * 16]})
        g.stub.ModelInfer(req, timeout=10,
                          metadata=(("traceparent", f"00-{TRACE}-{PARENT}-01"),))
        g.close()
        (span,) = wait_for(lambda: [s for s in collector.spans if s["traceId"] == TRACE], 20,
                           "the gRPC request's span")
        assert span["service"] == "dais-node" and span["parentSpanId"] == PARENT
        r = requests.post(f"{srv.url}/v2/models/mlp_small/infer", json=BODY, timeout=10)
        assert r.status_code == 200, r.text
        r = requests.post(f"{srv.url}/v2/models/nosuch/infer", json=BODY, timeout=10)
        assert r.status_code == 404, r.text
        spans = wait_for(lambda: [s for s in collector.spans if s["traceId"] != TRACE
                                  and s["name"] in ("infer mlp_small", "infer nosuch")]
                         if len(collector.spans) >= 3 else None, 20, "the two new traces' spans")
        assert not collector.bad, collector.bad
        by_name = {s["name"]: s for s in spans}
        assert "parentSpanId" not in by_name["infer mlp_small"] or \
            not by_name["infer mlp_small"]["parentSpanId"]
        attrs = {a["key"]: a["value"] for a in by_name["infer nosuch"]["attributes"]}
        assert attrs["dais.status"] == {"stringValue": "NOT_FOUND"}
        assert by_name["infer nosuch"]["status"]["code"] == 1  # the caller's error, not ours
    finally:
        collector.stop()
