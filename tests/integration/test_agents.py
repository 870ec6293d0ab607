"""Issue 38: agents. `kind: agent` applied with `dais ctl apply` is checked against the cluster
(routes whose model a deployment serves, collections that exist) and refused naming what is
missing, with nothing written; `dais agent run` consumes the trigger stream with a consumer
group, runs the steps (a feature lookup on the feature server, inference on the model, a branch,
an emit), records every run (`dais ctl get runs`), retries a failed run and dead-letters it after
max_attempts; a runtime killed with -9 mid-stream and started again finishes the stream with
every alert written exactly once. Real etcd, redis-server, `dais serve` (mlp_small, LibTorch)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time

import pytest

from cluster_util import apply, ctl
from conftest import metric_value, parse_prometheus, redis_call, wait_for

FEATURES = """\
domain: retail
entities: [{name: sku, key_type: int64}]
feature_groups:
  - name: stock
    entity: sku
    version: 1
    max_age: 1d
    ttl: 30d
    features:
      - {name: on_hand, dtype: FP32, default: 0}
      - {name: daily_sales, dtype: FP32, default: 0}
"""

ZEROS = ", ".join(["0"] * 13)


def agent_yaml(redis_port: int, name: str = "inventory-alert", route: str = "mlp_small",
               extra: str = "") -> str:
    return f"""\
kind: agent
name: {name}
tenant: retail
priority: high
sla: {{p99_ms: 500}}
trigger: {{stream: redis://127.0.0.1:{redis_port}/orders-{name}}}
max_attempts: 2
run_timeout: 10s
capabilities: {{routes: [{route}], feature_groups: [stock], streams: [alerts-{name}]}}
steps:
  - {{name: stock, features: {{features: ["stock:on_hand", "stock:daily_sales"],
                              entities: {{sku: "${{event.sku}}"}}}}}}
  - name: forecast
    infer:
      route: {route}
      inputs: [{{name: INPUT__0, datatype: FP32, shape: [1, 16],
                 data: ["${{event.qty}}", "${{stock.on_hand}}", "${{stock.daily_sales}}", {ZEROS}]}}]
  - {{name: short, branch: {{if: "${{event.qty}} > ${{stock.on_hand}}"}}}}
  - name: alert
    emit:
      stream: alerts-{name}
      fields: {{sku: "${{event.sku}}", order: "${{run.id}}", forecast: "${{forecast.OUTPUT__0.0}}"}}
{extra}"""


@pytest.fixture(scope="module")
def feature_server(start_module_server, model_repo, tmp_path_factory):
    spec = tmp_path_factory.mktemp("agent-features") / "stock.yaml"
    spec.write_text(FEATURES)
    srv = start_module_server(model_repo, "--feature-spec", str(spec))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    r = srv.post("/push", json={"push_source_name": "stock", "to": "online", "df": {
        "sku": list(range(1, 11)), "event_timestamp": [now] * 10,
        "on_hand": [float(10 * i) for i in range(1, 11)], "daily_sales": [1.0] * 10}}, timeout=10)
    assert r.status_code == 200, r.text
    return srv


def serve_route(dais_bin, etcd, tmp_path):
    apply(dais_bin, etcd, tmp_path, "name: mlp\nmodel: mlp_small\nreplicas: 1\n")
    apply(dais_bin, etcd, tmp_path, "kind: route\nname: mlp_small\nmodel: mlp_small\n"
          "versions: [{version: 1, weight: 100}]\n")


class Runtime:
    """`dais agent run` as a process of the test (killed by PID at the end)."""

    def __init__(self, dais_bin, etcd, name, gateway, log_dir, consumer="c1", *extra):
        self.log_path = log_dir / f"agent-{name}-{time.monotonic_ns()}.log"
        self.proc = subprocess.Popen(
            [str(dais_bin), "agent", "run", "--etcd", etcd.endpoint, "--name", name,
             "--gateway", gateway, "--consumer", consumer, "--metrics-port", "0", *extra],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def metrics(self):
        port = wait_for(lambda: re.search(r"ports: metrics=(\d+)", self.log()), 20,
                        "the agent's metrics port").group(1)
        import requests
        return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def stream_entries(port, stream):
    """[(id, {field: value})] of a stream, oldest first."""
    out = []
    for entry_id, kv in redis_call(port, "XRANGE", stream, "-", "+"):
        fields = {kv[i].decode(): kv[i + 1].decode() for i in range(0, len(kv), 2)}
        out.append((entry_id.decode(), fields))
    return out


def run_records(port, name):
    """The run records of an agent (dais:agent:<name>:runs), oldest first."""
    return [json.loads(f["trace"]) for _, f in stream_entries(port, f"dais:agent:{name}:runs")]


def drain(dais_bin, etcd, name, gateway, log_dir, *extra):
    """`dais agent run --drain` as consumer c1, until it exits (0) by itself."""
    rt = Runtime(dais_bin, etcd, name, gateway, log_dir, "c1", "--drain", *extra)
    try:
        assert rt.proc.wait(120) == 0, rt.log()
    finally:
        rt.stop()


def publish_orders(port, stream, orders):
    return [redis_call(port, "XADD", stream, "*", "sku", str(sku), "qty", str(qty)).decode()
            for sku, qty in orders]


def test_apply_checks_the_agent_against_the_cluster_and_writes_nothing_when_refused(
        etcd_server, redis_server, dais_bin, tmp_path):
    spec = agent_yaml(redis_server.port)
    # The route does not exist yet: refused, naming it; nothing written.
    r = apply_refused(dais_bin, etcd_server, tmp_path, spec)
    assert "route 'mlp_small' does not exist" in r.stderr, r.stderr
    assert etcd_server.get_prefix("/dais/agents/") == {}
    # The route exists but no deployment serves its model.
    apply(dais_bin, etcd_server, tmp_path, "kind: route\nname: mlp_small\nmodel: mlp_small\n"
          "versions: [{version: 1, weight: 100}]\n")
    r = apply_refused(dais_bin, etcd_server, tmp_path, spec)
    assert "sends to model 'mlp_small', which no deployment serves" in r.stderr, r.stderr
    # A step that uses what the capabilities do not list; a reference to a later step.
    r = apply_refused(dais_bin, etcd_server, tmp_path, spec.replace("streams: [alerts-", "streams: [x-"))
    assert "steps[3] (alert).emit.stream: 'alerts-inventory-alert' is not in capabilities.streams" \
        in r.stderr, r.stderr
    r = apply_refused(dais_bin, etcd_server, tmp_path,
                      spec.replace("${event.qty} > ${stock.on_hand}", "${alert.id} > 1"))
    assert "${alert.id} names no earlier step" in r.stderr, r.stderr
    r = apply_refused(dais_bin, etcd_server, tmp_path, spec + "colour: blue\n")
    assert "colour: unknown field" in r.stderr, r.stderr
    # A collection that does not exist.
    r = apply_refused(dais_bin, etcd_server, tmp_path, spec.replace(
        "capabilities: {", "capabilities: {collections: [users], "))
    assert "collection 'users' does not exist" in r.stderr, r.stderr
    assert etcd_server.get_prefix("/dais/agents/") == {}
    # With a deployment serving the model, it is applied and listed.
    apply(dais_bin, etcd_server, tmp_path, "name: mlp\nmodel: mlp_small\nreplicas: 1\n")
    out = apply(dais_bin, etcd_server, tmp_path, spec).stdout
    assert "agent inventory-alert applied (4 step(s); high priority)" in out
    table = ctl(dais_bin, etcd_server, "get", "agents").stdout
    assert re.search(r"inventory-alert\s+retail\s+high\s+redis://\S+\s+4\s+500", table), table
    stored = json.loads(ctl(dais_bin, etcd_server, "get", "agent", "inventory-alert",
                            "-o", "json").stdout)
    assert stored["steps"][1]["infer"]["route"] == "mlp_small"
    out = ctl(dais_bin, etcd_server, "delete", "agent", "inventory-alert").stdout
    assert "agent inventory-alert deleted" in out, out
    assert etcd_server.get_prefix("/dais/agents/") == {}


def apply_refused(dais_bin, etcd, tmp_path, spec):
    path = tmp_path / f"refused-{time.monotonic_ns()}.yaml"
    path.write_text(spec)
    r = ctl(dais_bin, etcd, "apply", "-f", str(path), check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "nothing applied" in r.stderr
    return r


def test_stream_runs_emit_once_even_when_every_trigger_is_delivered_again(
        etcd_server, redis_server, feature_server, dais_bin, tmp_path):
    name = "once"
    serve_route(dais_bin, etcd_server, tmp_path)
    apply(dais_bin, etcd_server, tmp_path, agent_yaml(redis_server.port, name))
    port = redis_server.port
    # sku i has 10*i on hand: qty 25 runs short for sku 1 and 2 only.
    ids = publish_orders(port, f"orders-{name}", [(sku, 25) for sku in range(1, 6)])
    drain(dais_bin, etcd_server, name, feature_server.url, tmp_path)
    alerts = stream_entries(port, f"alerts-{name}")
    assert sorted(f["sku"] for _, f in alerts) == ["1", "2"], alerts
    assert {f["order"] for _, f in alerts} == {ids[0], ids[1]}
    assert all(f["event_id"] == f"{name}:{f['order']}:alert" for _, f in alerts)
    runs = run_records(port, name)
    assert sorted(r["outcome"] for r in runs) == ["completed"] * 2 + ["stopped"] * 3
    assert all(s["outcome"] == "ok" for s in runs[0]["steps"][:2])
    # Every trigger delivered again (as after a crash between the emit and the ack): the runs
    # happen again, the emits are recognised and nothing is written twice.
    redis_call(port, "XGROUP", "SETID", f"orders-{name}", name, "0")
    drain(dais_bin, etcd_server, name, feature_server.url, tmp_path)
    assert len(stream_entries(port, f"alerts-{name}")) == 2
    runs = run_records(port, name)
    assert sum(1 for r in runs[5:] for s in r["steps"] if s["outcome"] == "duplicate") == 2
    table = ctl(dais_bin, etcd_server, "get", "runs", name).stdout
    assert re.search(r"\S+\s+1\s+completed\s+[\d.]+\s+stock:ok forecast:ok short:ok "
                     r"alert:duplicate", table), table


def test_a_failing_run_is_retried_then_dead_lettered_with_metrics(
        etcd_server, redis_server, feature_server, dais_bin, tmp_path):
    name = "retries"
    serve_route(dais_bin, etcd_server, tmp_path)
    apply(dais_bin, etcd_server, tmp_path, agent_yaml(redis_server.port, name))
    port = redis_server.port
    bad = publish_orders(port, f"orders-{name}", [(3, "many")])[0]
    good = publish_orders(port, f"orders-{name}", [(1, 50)])[0]
    rt = Runtime(dais_bin, etcd_server, name, feature_server.url, tmp_path, "c1",
                 "--retry-after-ms", "200")
    try:
        dead = wait_for(lambda: stream_entries(port, f"dais:agent:{name}:dead"), 30,
                        "the bad order dead-lettered")
        assert dead[0][1]["run_id"] == bad
        assert "input INPUT__0: 'many' is not a number" in dead[0][1]["error"]
        assert dead[0][1]["qty"] == "many"
        runs = run_records(port, name)
        tried = sorted(r["attempt"] for r in runs if r["run_id"] == bad)
        assert tried == [1, 2], runs
        assert [r["outcome"] for r in runs if r["run_id"] == good] == ["completed"]
        # Nothing left pending: the dead-lettered trigger was acknowledged.
        wait_for(lambda: redis_call(port, "XPENDING", f"orders-{name}", name)[0] == 0, 10,
                 "no pending entry")
        samples = parse_prometheus(rt.metrics())
        assert metric_value(samples, "dais_agent_runs_total", agent=name, outcome="failed") == 2
        assert metric_value(samples, "dais_agent_runs_total", agent=name,
                            outcome="completed") == 1
        assert metric_value(samples, "dais_agent_dead_lettered_total", agent=name) == 1
        assert metric_value(samples, "dais_agent_step_errors_total", agent=name,
                            step="forecast") == 2
        assert metric_value(samples, "dais_agent_step_duration_seconds_count", agent=name,
                            step="stock") == 3
        # The SLA's latency is of the runs that did not fail; the agent runs (not paused).
        assert metric_value(samples, "dais_agent_run_latency_seconds_count", agent=name) == 1
        assert metric_value(samples, "dais_agent_paused", agent=name) == 0
        promtool = shutil.which("promtool") or "/usr/bin/promtool"
        check = subprocess.run([promtool, "check", "metrics"], input=rt.metrics(),
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        rt.stop()


def test_a_runtime_killed_mid_stream_resumes_and_writes_every_alert_once(
        etcd_server, redis_server, feature_server, dais_bin, tmp_path):
    name = "crash"
    serve_route(dais_bin, etcd_server, tmp_path)
    apply(dais_bin, etcd_server, tmp_path, agent_yaml(redis_server.port, name))
    port = redis_server.port
    orders = [(1 + i % 10, 55) for i in range(1000)]  # short for sku 1..5: 500 alerts
    ids = publish_orders(port, f"orders-{name}", orders)
    rt = Runtime(dais_bin, etcd_server, name, feature_server.url, tmp_path, "c1", "--workers", "4")
    try:
        wait_for(lambda: len(stream_entries(port, f"dais:agent:{name}:runs")) >= 40, 60,
                 "some runs done")
        rt.proc.send_signal(signal.SIGKILL)
        rt.proc.wait(10)
    finally:
        rt.stop()
    done_before = len(stream_entries(port, f"dais:agent:{name}:runs"))
    assert done_before < len(orders), "the runtime finished before it was killed"
    drain(dais_bin, etcd_server, name, feature_server.url, tmp_path, "--workers", "4")
    alerts = stream_entries(port, f"alerts-{name}")
    expected = {ids[i] for i, (sku, qty) in enumerate(orders) if qty > 10 * sku}
    written = [f["order"] for _, f in alerts]
    assert len(written) == len(set(written)), "an alert written twice"
    assert set(written) == expected
    assert redis_call(port, "XPENDING", f"orders-{name}", name)[0] == 0


def http_agent_yaml(redis_port: int, name: str) -> str:
    """The inventory agent with an HTTP trigger instead of a stream."""
    return agent_yaml(redis_port, name).replace(
        f"trigger: {{stream: redis://127.0.0.1:{redis_port}/orders-{name}}}",
        f"trigger: {{http: true}}\nredis: 127.0.0.1:{redis_port}")


def test_an_http_trigger_runs_through_the_gateway_for_its_tenant_only(
        etcd_server, redis_server, feature_server, dais_bin, tmp_path):
    """POST /v1/agents/<name>/runs through the gateway: the run's outcome and context answered,
    a retry with the same Idempotency-Key writes nothing twice, another tenant is refused, a
    paused agent answers 503 with Retry-After, bad bodies 400."""
    import jwt  # Debian python3-jwt
    import requests
    from cluster_util import Gateway
    from test_memory_cluster import hs256_jwks
    name, port = "web", redis_server.port
    serve_route(dais_bin, etcd_server, tmp_path)
    out = apply(dais_bin, etcd_server, tmp_path, http_agent_yaml(port, name)).stdout
    assert "agent web applied" in out, out
    table = ctl(dais_bin, etcd_server, "get", "agents").stdout
    assert re.search(r"web\s+retail\s+high\s+http\s", table), table
    for tenant in ("retail", "lab"):
        apply(dais_bin, etcd_server, tmp_path, f"kind: tenant\nname: {tenant}\n")
    jwks, secret = hs256_jwks(tmp_path)

    def token(tenant):
        claims = {"exp": int(time.time()) + 600, "tenant": tenant}
        return {"authorization": "Bearer " + jwt.encode(claims, secret, algorithm="HS256",
                                                        headers={"kid": "k1"})}
    g = Gateway(dais_bin, etcd_server, tmp_path, "--jwks", str(jwks))
    rt = Runtime(dais_bin, etcd_server, name, feature_server.url, tmp_path, "c1")
    try:
        url = f"{g.url}/v1/agents/{name}/runs"
        retail = token("retail")

        def call(body, key=None, headers=None):
            h = dict(retail if headers is None else headers)
            if key:
                h["Idempotency-Key"] = key
            return requests.post(url, json=body, headers=h, timeout=30)
        # Routed once the runtime's endpoint is in etcd and the gateway's view.
        r = wait_for(lambda: (x := call({"sku": 1, "qty": 55}, "order-1")).status_code != 404
                     and x, 30, "the agent's HTTP trigger routed by the gateway")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["run_id"] == "h:order-1" and body["outcome"] == "completed", body
        assert body["context"]["event"]["qty"] == 55  # the JSON event keeps its types
        assert len(body["context"]["forecast"]["OUTPUT__0"]) > 0
        assert [s["outcome"] for s in body["trace"]["steps"]] == ["ok"] * 4
        alerts = stream_entries(port, f"alerts-{name}")
        assert [f["order"] for _, f in alerts] == ["h:order-1"], alerts
        # The client's retry (same key): run again, the emit recognised, nothing written twice.
        again = call({"sku": 1, "qty": 55}, "order-1").json()
        assert again["trace"]["steps"][-1]["outcome"] == "duplicate", again
        assert len(stream_entries(port, f"alerts-{name}")) == 1
        # Enough stock: the branch stops the run (still a 200: the run did what it should).
        r = call({"sku": 1, "qty": 5})
        assert r.status_code == 200 and r.json()["outcome"] == "stopped", r.text
        # A run the event cannot make names its step (422); a bad body is refused (400).
        r = call({"sku": 1, "qty": "many"})
        assert r.status_code == 422 and "forecast: input INPUT__0: 'many' is not a number" \
            in r.json()["error"], r.text
        r = requests.post(url, data="[1, 2]", headers=retail, timeout=10)
        assert r.status_code == 400 and "JSON object" in r.json()["error"], r.text
        # Tenancy: another tenant's token is refused, no token is 401; unknown agents 404.
        r = call({"sku": 1, "qty": 55}, headers=token("lab"))
        assert r.status_code == 403 and "may not call agent web" in r.json()["error"], r.text
        assert requests.post(url, json={}, timeout=10).status_code == 401
        r = requests.post(f"{g.url}/v1/agents/nosuch/runs", json={}, headers=retail, timeout=10)
        assert r.status_code == 404 and "no runtime serving an HTTP trigger" in r.text, r.text
        # Past the gateway, straight to the runtime: refused without the key it published.
        rt.metrics()  # (waits for its port)
        direct = re.search(r"ports: metrics=(\d+)", rt.log()).group(1)
        r = requests.post(f"http://127.0.0.1:{direct}/v1/agents/{name}/runs", json={"sku": 1},
                          headers=retail, timeout=10)
        assert r.status_code == 401 and "through the gateway" in r.json()["error"], r.text
        key = json.loads(etcd_server.get_prefix(f"/dais/agent-endpoints/{name}/")[
            f"/dais/agent-endpoints/{name}/c1"])["key"]
        assert len(key) == 32
        # Paused by the orchestrator: 503 with Retry-After, counted; resumed: runs again.
        etcd_server.ctl("put", f"/dais/agent-control/{name}",
                        json.dumps({"state": "paused", "reason": "test"}))
        # (a 503 Response is falsy: wait_for gets it in a list)
        r = wait_for(lambda: (x := call({"sku": 2, "qty": 55})).status_code == 503 and [x], 10,
                     "the paused agent refusing HTTP triggers")[0]
        assert r.headers.get("Retry-After") == "1" and "paused" in r.json()["error"], r.text
        samples = parse_prometheus(rt.metrics())
        assert metric_value(samples, "dais_agent_http_refused_total", agent=name,
                            reason="paused") >= 1
        etcd_server.ctl("del", f"/dais/agent-control/{name}")
        wait_for(lambda: call({"sku": 2, "qty": 55}).status_code == 200, 10, "resumed")
        # Every run recorded (dais ctl get runs); the SLA latency counts those that did not fail.
        runs = run_records(port, name)
        assert [r["outcome"] for r in runs].count("failed") == 1
        assert metric_value(parse_prometheus(rt.metrics()), "dais_agent_run_latency_seconds_count",
                            agent=name) == len(runs) - 1
    finally:
        rt.stop()
        g.stop()


def control(etcd, name):
    raw = etcd.get_prefix(f"/dais/agent-control/{name}").get(f"/dais/agent-control/{name}")
    return json.loads(raw) if raw else {}


def agent_events(etcd):
    return [json.loads(v) for v in etcd.get_prefix("/dais/events/").values()
            if json.loads(v)["kind"].startswith("agent-")]


def test_agents_are_placed_on_a_node_and_a_low_priority_one_gives_way_to_a_high_one(
        etcd_server, redis_server, feature_server, start_server, model_repo, dais_bin, tmp_path):
    """Both agents are placed by the scheduler on the node, which runs their runtimes. A burst of
    triggers for both: the high-priority agent's latency goes over its SLA, the orchestrator
    pauses the low-priority one (an event with the reason), and resumes it once the high one is
    calm; the low one then works off its backlog, every alert written once."""
    from cluster_util import Scheduler
    port = redis_server.port
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "retail").write_text("tok-retail\n")  # (the stand-in gateway checks no token)
    node = start_server(model_repo, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                        "--lease-ttl-secs", "2", "--agent-gateway", feature_server.url,
                        "--agent-features-url", feature_server.url, "--agent-tokens",
                        str(tokens), command="node")
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path, "--agent-calm-ms", "1000")
    try:
        serve_route(dais_bin, etcd_server, tmp_path)
        for name, priority in (("urgent", "high"), ("bulk", "low")):
            spec = agent_yaml(port, name).replace("priority: high", f"priority: {priority}")
            spec = spec.replace("sla: {p99_ms: 500}", "sla: {p99_ms: 100, window: 2s}")
            apply(dais_bin, etcd_server, tmp_path, spec)
        # Placed, and their runtimes report from the node.
        for name in ("urgent", "bulk"):
            wait_for(lambda: f"/dais/agent-status/{name}/n1" in
                     etcd_server.get_prefix(f"/dais/agent-status/{name}/"), 60,
                     f"{name}'s runtime reporting from n1")
        insts = {k.split("/")[-1]: json.loads(v)
                 for k, v in etcd_server.get_prefix("/dais/instances/n1/").items()}
        assert insts["agent:urgent"]["state"] == "RUNNING", insts
        assert insts["agent:urgent"]["reason"].startswith("pid "), insts
        # The tenant's token reaches the runtime in its environment, not in its arguments.
        pid = int(insts["agent:urgent"]["reason"].split()[1])
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        assert b"DAIS_AGENT_TOKEN=tok-retail" in environ
        assert b"tok-retail" not in open(f"/proc/{pid}/cmdline", "rb").read()
        orders = [(1 + i % 10, 55) for i in range(600)]  # short for sku 1..5
        bulk_ids = publish_orders(port, "orders-bulk", orders)
        publish_orders(port, "orders-urgent", orders)
        paused = wait_for(lambda: control(etcd_server, "bulk").get("state") == "paused"
                          and control(etcd_server, "bulk"), 60, "bulk paused")
        assert re.match(r"agent urgent \(high priority\) p99 \d+ ms > 0.5 of its SLA 100 ms",
                        paused["reason"]), paused
        assert control(etcd_server, "urgent") == {}  # the high one is never paused
        wait_for(lambda: control(etcd_server, "bulk").get("state") == "running", 120,
                 "bulk resumed")
        # Nothing lost: the low one works off its backlog; every alert once.
        expected = {bulk_ids[i] for i, (sku, qty) in enumerate(orders) if qty > 10 * sku}
        alerts = wait_for(lambda: (lambda a: a if len(a) >= len(expected) else None)(
            [f["order"] for _, f in stream_entries(port, "alerts-bulk")]), 120,
            "bulk's alerts")
        assert sorted(alerts) == sorted(expected)
        kinds = [(e["kind"], e["deployment"]) for e in agent_events(etcd_server)]
        assert ("agent-paused", "agent:bulk") in kinds and ("agent-resumed", "agent:bulk") in kinds
        # Released in steps: paused -> throttled -> running.
        assert ("agent-throttled", "agent:bulk") in kinds, kinds
        # The node publishes its live load (a signal of the orchestrator).
        load = json.loads(etcd_server.get_prefix("/dais/node-load/n1")["/dais/node-load/n1"])
        assert 0 <= load["cpu_busy"] <= 1 and load["cpus"] >= 1, load
        table = ctl(dais_bin, etcd_server, "get", "events").stdout
        assert "agent-paused" in table and "p99" in table, table
    finally:
        sched.stop()
        print(sched.log()[-3000:])
        node.stop()


def test_a_throttled_agent_starts_no_more_runs_than_its_rate(
        etcd_server, redis_server, feature_server, dais_bin, tmp_path):
    """The orchestrator's "throttled" control: the runtime starts at most its share of `rate` runs a
    second (a bucket of one second's worth), whatever its workers; released, it runs freely."""
    name, port = "slow", redis_server.port
    serve_route(dais_bin, etcd_server, tmp_path)
    apply(dais_bin, etcd_server, tmp_path, agent_yaml(port, name))
    etcd_server.ctl("put", f"/dais/agent-control/{name}", json.dumps(
        {"state": "throttled", "reason": "test", "rate": 4}))
    rt = Runtime(dais_bin, etcd_server, name, feature_server.url, tmp_path, "c1", "--workers", "4")
    try:
        wait_for(lambda: metric_value(parse_prometheus(rt.metrics()),
                                      "dais_agent_throttle_runs_per_second", agent=name) == 4,
                 20, "the runtime throttled")
        publish_orders(port, f"orders-{name}", [(1 + i % 10, 55) for i in range(60)])
        runs = wait_for(lambda: (lambda r: r if len(r) >= 20 else None)(run_records(port, name)),
                        60, "20 throttled runs")
        starts = sorted(r["start_ms"] for r in runs)
        # 20 starts at 4 a second with 4 in the bucket take at least (20 - 4) / 4 = 4 s.
        assert starts[19] - starts[0] >= 3500, starts[:20]
        etcd_server.ctl("del", f"/dais/agent-control/{name}")
        wait_for(lambda: len(run_records(port, name)) == 60, 60, "the rest run freely")
        assert metric_value(parse_prometheus(rt.metrics()), "dais_agent_throttle_runs_per_second",
                            agent=name) == 0
    finally:
        rt.stop()


def test_the_example_agents_demo_runs(dais_bin):
    """scripts/agents_demo.py, as a newcomer runs it: both example agents placed on a node, their
    alerts and offers written, apply to first run timed."""
    import os
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(["/usr/bin/python3", str(root / "scripts/agents_demo.py"), "--build",
                        str(Path(dais_bin).parents[2]), "--orders", "20", "--inactive", "10"],
                       capture_output=True, text=True, timeout=300, env=os.environ)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"inventory alerts: \d+ of 20 orders ran short", r.stdout), r.stdout
    assert re.search(r"retention offers: \d+ of 10 inactive users at risk", r.stdout), r.stdout
    assert re.search(r"agent:inventory-alert\s+RUNNING\s+pid \d+", r.stdout), r.stdout
    assert re.search(r"apply -> first run: inventory-alert [\d.]+ s, user-retention [\d.]+ s",
                     r.stdout), r.stdout


def test_a_timer_agent_runs_once_per_period_across_its_runtimes(
        redis_server, feature_server, dais_bin, tmp_path):
    """`trigger: {every: ...}` from a spec file (no etcd): two runtimes of the same agent make one
    run per period between them (run id t<period>), each emitting once."""
    port = redis_server.port
    spec = tmp_path / "tick.yaml"
    spec.write_text(f"""\
kind: agent
name: tick
tenant: ops
trigger: {{every: 300ms}}
redis: 127.0.0.1:{port}
capabilities: {{streams: [ticks]}}
steps:
  - {{name: note, emit: {{stream: ticks, fields: {{run: "${{run.id}}"}}}}}}
""")
    port = redis_server.port
    procs = [subprocess.Popen([str(dais_bin), "agent", "run", "-f", str(spec), "--gateway",
                               feature_server.url, "--consumer", f"r{i}"],
                              stdout=open(tmp_path / f"tick-{i}.log", "wb"),
                              stderr=subprocess.STDOUT) for i in (1, 2)]
    try:
        ticks = wait_for(lambda: (lambda t: t if len(t) >= 5 else None)(
            stream_entries(port, "ticks")), 30, "five ticks")
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    runs = [f["run"] for _, f in ticks]
    assert all(re.fullmatch(r"t\d+", r) for r in runs), runs
    # One run per period between the two runtimes (not two, one of them emitting a duplicate).
    records = run_records(port, "tick")
    ids = [r["run_id"] for r in records]
    assert len(ids) == len(set(ids)), ids
    assert all(s["outcome"] == "ok" for r in records for s in r["steps"]), records
    # Both runtimes took periods (the marker is shared, not per runtime).
    assert len(runs) == len(set(runs))
