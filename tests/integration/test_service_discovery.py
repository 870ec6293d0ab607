"""Issue 35: Prometheus discovers a cluster's nodes and gateways from etcd through the
scheduler's GET /sd/targets (http_sd), scrapes them, and forgets what leaves; the etcd
reachability gauge they export is what DaisEtcdUnreachable watches."""

from __future__ import annotations

import requests

from cluster_util import Gateway, Prometheus, Scheduler
from conftest import free_port, wait_for

TTL = 2


def test_prometheus_discovers_nodes_and_gateways_through_the_scheduler(
        dais_bin, etcd_server, start_server, model_repo, tmp_path):
    sched = Scheduler(dais_bin, etcd_server, "s1", tmp_path, "--metrics-port", "0")
    gw = None
    try:
        sd = f"http://127.0.0.1:{sched.metrics_port()}/sd/targets"
        node = start_server(model_repo, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                            "--lease-ttl-secs", str(TTL), "--labels", "zone=a",
                            "--metrics-port", str(free_port()), command="node")
        gw = Gateway(dais_bin, etcd_server, tmp_path)

        def groups():
            r = requests.get(sd, timeout=5)
            assert r.status_code == 200, r.text
            got = r.json()
            return got if len(got) == 2 else None
        found = {g["labels"]["dais_role"]: g for g in wait_for(groups, 20, "both targets in SD")}
        # The node's target is its own metrics port (--metrics-port moved /metrics off HTTP).
        assert node.metrics_port and node.metrics_port != node.http_port
        assert found["node"]["targets"] == [f"127.0.0.1:{node.metrics_port}"], found
        assert found["node"]["labels"]["dais_node"] == "n1"
        assert found["node"]["labels"]["__meta_dais_label_zone"] == "a"
        assert found["gateway"]["targets"] == [gw.url.removeprefix("http://")], found
        only_nodes = requests.get(sd, params={"role": "node"}, timeout=5).json()
        assert [g["labels"]["dais_role"] for g in only_nodes] == ["node"]
        r = requests.get(sd, params={"role": "nodes"}, timeout=5)
        assert r.status_code == 400 and "node or gateway" in r.text, r.text

        prom = Prometheus(free_port(), [], tmp_path, scrape_configs=(
            "  - job_name: dais\n    http_sd_configs:\n"
            f"      - url: {sd}\n        refresh_interval: 1s\n"
            "    relabel_configs:\n"
            "      - source_labels: [__meta_dais_label_zone]\n        target_label: zone\n"))
        try:
            def up_targets():
                active = prom.api("targets")["activeTargets"]
                up = {t["labels"].get("dais_role"): t for t in active if t["health"] == "up"}
                return up if {"node", "gateway"} <= set(up) else None
            up = wait_for(up_targets, 60, "Prometheus scraping the discovered node and gateway")
            assert up["node"]["labels"]["zone"] == "a"  # relabelled from the node's labels

            def reachable():
                res = prom.api("query", query="dais_etcd_reachable")["result"]
                roles = {r["metric"].get("dais_role"): r["value"][1] for r in res}
                return roles if {"node", "gateway"} <= set(roles) else None
            assert set(wait_for(reachable, 30, "dais_etcd_reachable scraped").values()) == {"1"}

            # The gateway stops (its registration goes): Prometheus stops scraping it.
            gw.stop()
            wait_for(lambda: not any(t["labels"].get("dais_role") == "gateway"
                                     for t in prom.api("targets")["activeTargets"]),
                     30, "the stopped gateway dropped from the targets")
        finally:
            prom.stop()
    finally:
        if gw:
            gw.stop()
        sched.stop()
