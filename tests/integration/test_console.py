"""Issue 36, `dais console`: the operator's page over a real cluster on loopback (etcd, two
`dais node`, a scheduler, a gateway with traffic), driven in Debian's headless Chromium:
the numbers on the page are the cluster's, a rollout's plots grow while traffic runs, rollback
from the page moves the gateway's traffic, and an action without the admin claim is refused.
Screenshots go to build/test-artifacts/console/ (or $DAIS_ARTIFACTS_DIR)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests

from cluster_util import ctl
from conftest import wait_for
from test_memory_cluster import hs256_jwks
from test_rollout import BODY, Traffic, rollout, rollout_cluster, route  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[2]


class Console:
    """A `dais console` process on a free port (read from its log)."""

    def __init__(self, dais_bin, etcd, log_dir, *extra):
        self.log_path = log_dir / "console.log"
        self.proc = subprocess.Popen(
            [str(dais_bin), "console", "--etcd", etcd.endpoint, "--http-port", "0",
             "--scrape-interval-ms", "500", *extra],
            stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)
        found = wait_for(lambda: self.proc.poll() is None and re.search(
            r"ports: http=(\d+)", self.log()) or (self.proc.poll() is not None and "exited"),
            20, "the console's port")
        assert found != "exited", self.log()
        self.url = f"http://127.0.0.1:{found.group(1)}"

    def log(self):
        return self.log_path.read_text(errors="replace")

    def cpu_seconds(self):
        """User + system CPU the console has used so far (/proc/PID/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def act(self, action, target, token=None, **headers):
        if token:
            headers["Authorization"] = "Bearer " + token
        return requests.post(self.url + "/api/actions", json={"action": action, "target": target},
                             headers=headers, timeout=10)


def tokens(tmp_path):
    import jwt  # Debian python3-jwt
    path, secret = hs256_jwks(tmp_path)

    def token(sub, role):
        claims = {"exp": int(time.time()) + 600, "sub": sub, "role": role}
        return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "k1"})
    return path, token("alice", "admin"), token("bob", "viewer")


@pytest.fixture
def console(rollout_cluster, dais_bin, tmp_path):  # noqa: F811
    jwks, admin, viewer = tokens(tmp_path)
    c = Console(dais_bin, rollout_cluster["etcd"], tmp_path, "--jwks", str(jwks))
    c.admin, c.viewer = admin, viewer
    yield c
    c.stop()
    print(f"--- console log:\n{c.log()[-3000:]}")


def test_state_metrics_and_actions_through_the_api(console, rollout_cluster, dais_bin, tmp_path):
    etcd, gw = rollout_cluster["etcd"], rollout_cluster["gateway"]
    state = wait_for(lambda: (lambda s: s if len(s.get("instances", [])) == 2 else None)(
        requests.get(console.url + "/api/state", timeout=5).json()), 20, "the state")
    assert sorted(n["node"] for n in state["nodes"]) == ["n1", "n2"]
    assert sorted(d["name"] for d in state["deployments"]) == ["ranker-v1", "ranker-v2"]
    assert [r["name"] for r in state["routes"]] == ["ranker"]
    assert {i["state"] for i in state["instances"]} == {"READY"}
    # The gateway's traffic becomes a series of the route's v1.

    def v1_series():
        requests.post(gw.url + "/v2/models/ranker/infer", json=BODY, timeout=5)
        m = requests.get(console.url + "/api/metrics", timeout=5).json()
        return m if any(s["route"] == "ranker" and s["version"] == "1" and
                        any(p[1] > 0 for p in s["points"]) for s in m.get("series", [])) else None
    m = wait_for(v1_series, 20, "the route's series")
    assert m["targets_up"] >= 3 and m["targets_down"] == [], m  # a gateway and two nodes
    # Refusals name what is wrong, and change nothing.
    r = console.act("cordon", "n1")
    assert r.status_code == 401 and "Bearer" in r.json()["error"], r.text
    r = console.act("cordon", "n1", console.viewer)
    assert r.status_code == 403 and "bob may look but not act" in r.json()["error"], r.text
    r = console.act("reboot", "n1", console.admin)
    assert r.status_code == 400 and "unknown action 'reboot'" in r.json()["error"], r.text
    r = console.act("cordon", "n9", console.admin)
    assert r.status_code == 404 and "no node 'n9'" in r.json()["error"], r.text
    for origin in ("http://evil.example", "null"):
        r = console.act("cordon", "n1", console.admin, Origin=origin)
        assert r.status_code == 403 and "cross-origin" in r.json()["error"], (origin, r.text)
    r = console.act("pause", "ranker", console.admin)
    assert r.status_code == 404 and "no rollout of 'ranker'" in r.json()["error"], r.text
    assert etcd.get_prefix("/dais/cordoned/") == {}
    # An admin's action takes effect and is an event naming who.
    r = console.act("cordon", "n1", console.admin)
    assert r.status_code == 200 and r.json()["message"] == "node n1 cordoned", r.text
    assert etcd.get_prefix("/dais/cordoned/") == {"/dais/cordoned/n1": "cordon"}
    events = ctl(dais_bin, etcd, "get", "events", "-o", "json").stdout
    assert "node n1 cordoned (by alice through the console)" in events, events
    r = console.act("uncordon", "n1", console.admin)
    assert r.status_code == 200 and etcd.get_prefix("/dais/cordoned/") == {}
    text = requests.get(console.url + "/metrics", timeout=5).text
    assert 'dais_console_actions_total{action="cordon",outcome="refused"} 2' in text, text
    assert 'dais_console_actions_total{action="cordon",outcome="failed"} 1' in text, text
    assert 'dais_console_actions_total{action="cordon",outcome="done"} 1' in text, text


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def artifacts():
    d = Path(os.environ.get("DAIS_ARTIFACTS_DIR", REPO / "build" / "test-artifacts")) / "console"
    d.mkdir(parents=True, exist_ok=True)
    return d


def canary_points(driver):
    """Points of the canary's line in the rollout's p99 plot (0 when not drawn yet)."""
    return driver.execute_script(
        "const l = document.querySelector('[data-plot=\"requests/s\"] polyline"
        "[data-series^=\"canary\"]'); return l ? l.getAttribute('points').split(' ').length : 0;")


def js(driver, expr):
    """`expr` evaluated in the page (no element handles: the page redraws as data arrives)."""
    return driver.execute_script("return " + expr)


def click(driver, css):
    """A real click on `css`; found again if a redraw replaced it between find and click."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def once():
        try:
            driver.find_element(By.CSS_SELECTOR, css).click()
            return True
        except StaleElementReferenceException:
            return False
    wait_for(once, 5, f"a click on {css}")


def test_the_page_in_a_real_browser(console, rollout_cluster, dais_bin):
    from selenium.webdriver.common.by import By
    etcd, gw = rollout_cluster["etcd"], rollout_cluster["gateway"]
    out = artifacts()
    driver = browser()
    traffic = None
    cpu0, wall0 = console.cpu_seconds(), time.monotonic()
    try:
        started = time.monotonic()
        driver.get(console.url + "/#cluster")
        wait_for(lambda: js(driver, "document.querySelector('#sum-nodes .n')?.textContent")
                 == "2", 10, "the node count on the page")
        print(f"page load to numbers shown: {time.monotonic() - started:.3f} s")
        assert js(driver, "[...document.querySelectorAll('.node .name')].map(e => e.textContent)"
                          ".sort()") == ["n1", "n2"]
        assert js(driver, "document.querySelector('#sum-ready .n').textContent") == "2 / 2"
        # A change in etcd reaches the open page by itself.
        changed = time.monotonic()
        ctl(dais_bin, etcd, "cordon", "n2")
        wait_for(lambda: js(driver, "document.querySelector('[data-node=n2]').className")
                 == "node cordoned", 10, "n2 cordoned")
        print(f"etcd change to page: {time.monotonic() - changed:.3f} s")
        ctl(dais_bin, etcd, "uncordon", "n2")
        driver.save_screenshot(str(out / "cluster.png"))
        # A rollout with traffic: its plots grow while the page is open.
        ctl(dais_bin, etcd, "rollout", "start", "ranker", "--to", "2", "--steps", "50,100",
            "--interval", "1h")
        traffic = Traffic(gw.url + "/v2/models/ranker/infer")
        driver.get(console.url + "/#rollouts")
        wait_for(lambda: canary_points(driver) >= 2, 20, "the canary's line drawn")
        first = canary_points(driver)
        wait_for(lambda: canary_points(driver) > first, 10, "the canary's line growing")
        assert js(driver, "document.querySelector('.rollout-state').textContent") == "running"
        # Read-only: the buttons stay disabled.
        driver.find_element(By.ID, "token").send_keys(console.viewer)
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        wait_for(lambda: "read-only" in js(driver, "document.getElementById('whoami').textContent"),
                 10, "signed in read-only")
        assert js(driver, "document.querySelector('[data-action=rollback]').disabled")
        driver.save_screenshot(str(out / "rollout.png"))
        # The admin rolls back from the page: the gateway's traffic goes to v1 only.
        driver.find_element(By.ID, "token").send_keys(console.admin)
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        wait_for(lambda: "(admin)" in js(driver, "document.getElementById('whoami').textContent"),
                 10, "signed in as admin")
        wait_for(lambda: not js(driver, "document.querySelector('[data-action=rollback]').disabled"),
                 10, "rollback enabled")
        click(driver, '[data-action="rollback"]')
        wait_for(lambda: rollout(etcd)["state"] == "aborted", 10, "the rollout aborted")
        assert "by alice (console)" in rollout(etcd)["reason"]
        assert route(etcd)["versions"] == [{"version": 1, "weight": 100}] or \
            all(v["weight"] == 0 for v in route(etcd)["versions"] if v["version"] == 2)
        wait_for(lambda: js(driver, "document.querySelector('.rollout-state').textContent") ==
                 "aborted", 10, "the page shows the rollout aborted")
        traffic.versions.clear()
        wait_for(lambda: sum(traffic.versions.values()) >= 20, 20, "traffic after rollback")
        assert set(traffic.versions) == {"1"}, traffic.versions
        driver.get(console.url + "/#events")
        wait_for(lambda: "by alice through the console" in
                 js(driver, "document.getElementById('events').textContent"), 10,
                 "the action's event listed")
        driver.save_screenshot(str(out / "events.png"))
        driver.get(console.url + "/#health")
        # The health page says what the metrics API says: no alert, or each one by name.

        def health_matches():
            alerts = requests.get(console.url + "/api/metrics", timeout=5).json()["alerts"]
            shown = js(driver, "document.getElementById('alerts').textContent")
            return all(a["name"] in shown for a in alerts) if alerts else \
                "No alert fires" in shown
        wait_for(health_matches, 10,
                 "the health page")
        driver.save_screenshot(str(out / "health.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
        wall = time.monotonic() - wall0
        print(f"console CPU with one browser open: {100 * (console.cpu_seconds() - cpu0) / wall:.1f}"
              f" % of a core over {wall:.1f} s (scraping every 0.5 s)")
    finally:
        if traffic:
            traffic.stop()
        driver.quit()


def etcd_put_many(etcd, items):
    """Writes {key: value} through etcd's JSON gateway (thousands of keys in seconds)."""
    import base64
    s = requests.Session()
    b64 = lambda t: base64.b64encode(t.encode()).decode()  # noqa: E731
    for k, v in items.items():
        r = s.post(f"http://{etcd.endpoint}/v3/kv/put", json={"key": b64(k), "value": b64(v)},
                   timeout=10)
        assert r.status_code == 200, r.text


def trace_nodes(n):
    """The first `n` GPU nodes of the scheduler simulator's trace (../shared/data, the
    Alibaba GPU cluster), or as many nodes of the same shapes when the trace is not there."""
    import csv
    path = REPO.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv"
    if path.exists():
        with open(path) as f:
            return [(r["sn"], int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"])
                    for r in csv.DictReader(f)][:n]
    shapes = [(64000, 262144, 2, "P100"), (96000, 786432, 8, "V100M32"), (96000, 393216, 8, "T4")]
    return [(f"openb-node-{i:04d}", *shapes[i % 3]) for i in range(n)]


def test_a_thousand_nodes_render(etcd_server, dais_bin, tmp_path):
    """1,000 nodes of the simulator's trace with GPUs shared by fractional instances: every node
    on the page, and the fragmentation the page shows is the one computed here."""
    import random
    rng = random.Random(5)
    nodes, items, stranded, per_node = trace_nodes(1000), {}, 0.0, {}
    for name, cpu, mem, gpus, model in nodes:
        before = stranded
        items[f"/dais/nodes/{name}"] = json.dumps({
            "node": name, "cpu_milli": cpu, "memory_mib": mem,
            "gpus": [{"model": model}] * gpus, "labels": {"gpu-model": model}})
        for g in range(gpus):
            milli = rng.choice([0, 0, 250, 500, 1000])
            if milli:
                items[f"/dais/assignments/{name}/d{g}"] = json.dumps({
                    "deployment": f"d{g}", "model": "m", "version": 1, "gpus": [g],
                    "gpu_milli": milli})
            if 0 < milli < 1000:
                stranded += (1000 - milli) / 1000
        per_node[name] = stranded - before
    etcd_put_many(etcd_server, items)
    console = Console(dais_bin, etcd_server, tmp_path)
    driver = browser()
    try:
        started = time.monotonic()
        driver.get(console.url + "/#cluster")
        wait_for(lambda: js(driver, "document.querySelectorAll('.node').length") == 1000, 30,
                 "1,000 node cards")
        print(f"1,000 nodes: page load to every card shown {time.monotonic() - started:.3f} s")
        assert js(driver, "document.querySelector('#sum-nodes .n').textContent") == "1000"
        assert js(driver, "document.querySelector('#sum-frag .n').textContent") == \
            f"{stranded:.2f}"
        name = max(per_node, key=per_node.get)  # and per node, on its card
        meta = js(driver, f"document.querySelector('[data-node=\"{name}\"] .meta').textContent")
        assert f"stranded {per_node[name]:.2f} GPU" in meta, meta
        # The filter narrows the map to the nodes it names.
        driver.find_element("id", "node-filter").send_keys("V100M32")
        wait_for(lambda: 0 < js(driver, "document.querySelectorAll('.node').length") < 1000, 10,
                 "the filtered map")
        driver.save_screenshot(str(artifacts() / "thousand-nodes.png"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        driver.quit()
        console.stop()


def test_figures_and_alerts_from_prometheus(rollout_cluster, dais_bin, tmp_path):  # noqa: F811
    """With --prometheus the plots come from its queries and the alerts from its rules."""
    from cluster_util import Prometheus
    from conftest import free_port
    etcd, gw = rollout_cluster["etcd"], rollout_cluster["gateway"]
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n  - name: console-test\n    rules:\n"
                     "      - alert: DaisConsoleTestFiring\n        expr: vector(1)\n"
                     "        labels: {severity: P2}\n"
                     "        annotations: {summary: a rule that always fires}\n")
    port = free_port()
    prometheus = Prometheus(port, [gw.url.split("//")[1]], tmp_path, rule_files=[rules])
    console = Console(dais_bin, etcd, tmp_path, "--prometheus", f"127.0.0.1:{port}")
    try:
        def seen():
            requests.post(gw.url + "/v2/models/ranker/infer", json=BODY, timeout=5)
            m = requests.get(console.url + "/api/metrics", timeout=5).json()
            drawn = any(s["route"] == "ranker" and s["version"] == "1" and
                        any(p[1] and p[4] is not None for p in s["points"])
                        for s in m.get("series", []))
            firing = any(a["name"] == "DaisConsoleTestFiring" and
                         a["text"] == "a rule that always fires" for a in m.get("alerts", []))
            return m if m.get("source") == "prometheus" and drawn and firing else None
        m = wait_for(seen, 60, "the route's figures and the rule's alert through Prometheus")
        assert m["targets_up"] == 1 and m["targets_down"] == [], m
    finally:
        console.stop()
        prometheus.stop()
