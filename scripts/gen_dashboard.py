#!/usr/bin/env python3
"""Writes deploy/grafana/dais-overview.json, the Grafana dashboard of a dais cluster, from the
panel list below (edit here, not the JSON). tests/integration/test_dashboard.py checks that the
file is what this script writes and that every query names a metric dais exports.

usage: /usr/bin/python3 scripts/gen_dashboard.py [OUT]
"""
import json
import sys
from pathlib import Path

DS = {"type": "prometheus", "uid": "${datasource}"}

# (row title, [(panel title, unit, [(PromQL, legend)], kind)]); kind: timeseries or stat.
ROWS = [
    ("Nodes: models", [
        ("Requests/s by model", "reqps", [
            ('sum by (model) (rate(dais_inference_request_success_total[$__rate_interval]))',
             "{{model}}")], "timeseries"),
        ("Failures/s by model and reason", "reqps", [
            ('sum by (model, reason) (rate(dais_inference_request_failure_total[$__rate_interval]))',
             "{{model}} {{reason}}")], "timeseries"),
        ("p50 / p99 request latency by model (P1 at 150 ms)", "s", [
            ('histogram_quantile(0.5, sum by (le, model) (rate(dais_request_duration_seconds_bucket[$__rate_interval])))',
             "p50 {{model}}"),
            ('histogram_quantile(0.99, sum by (le, model) (rate(dais_request_duration_seconds_bucket[$__rate_interval])))',
             "p99 {{model}}")], "timeseries"),
        ("Queue time p99 by model", "s", [
            ('histogram_quantile(0.99, sum by (le, model) (rate(dais_queue_duration_seconds_bucket[$__rate_interval])))',
             "{{model}}")], "timeseries"),
        ("Mean batch size", "none", [
            ('sum by (model) (rate(dais_batch_size_sum[$__rate_interval])) / sum by (model) (rate(dais_batch_size_count[$__rate_interval]))',
             "{{model}}")], "timeseries"),
        ("Versions not ready", "none", [
            ('count(dais_model_ready == 0) or vector(0)', "not ready")], "stat"),
    ]),
    ("Gateway", [
        ("Requests/s by route and code", "reqps", [
            ('sum by (route, code) (rate(dais_gateway_requests_total[$__rate_interval]))',
             "{{route}} {{code}}")], "timeseries"),
        ("p99 by route and version (stable vs canary)", "s", [
            ('histogram_quantile(0.99, sum by (le, route, version) (rate(dais_gateway_request_duration_seconds_bucket[$__rate_interval])))',
             "{{route}} v{{version}}")], "timeseries"),
        ("5xx ratio by route and version", "percentunit", [
            ('sum by (route, version) (rate(dais_gateway_requests_total{code=~"5.."}[$__rate_interval])) / sum by (route, version) (rate(dais_gateway_requests_total[$__rate_interval]))',
             "{{route}} v{{version}}")], "timeseries"),
        ("Upstream outcomes by node", "reqps", [
            ('sum by (node, outcome) (rate(dais_gateway_upstream_requests_total[$__rate_interval]))',
             "{{node}} {{outcome}}")], "timeseries"),
        ("Retries, fallbacks, ejections, rate limited", "ops", [
            ('sum(rate(dais_gateway_retries_total[$__rate_interval]))', "retries"),
            ('sum(rate(dais_gateway_fallbacks_total[$__rate_interval]))', "fallbacks"),
            ('sum(rate(dais_gateway_ejections_total[$__rate_interval]))', "ejections"),
            ('sum(rate(dais_gateway_rate_limited_total[$__rate_interval]))', "rate limited"),
            ('sum(rate(dais_gateway_auth_failures_total[$__rate_interval]))', "auth failures")],
         "timeseries"),
    ]),
    ("Scheduler and rollouts", [
        ("Leader", "none", [('sum(dais_scheduler_leader)', "leaders")], "stat"),
        ("Pending instances (leader)", "none", [
            ('max(dais_scheduler_pending_instances and on (instance, job) (dais_scheduler_leader == 1))',
             "pending")], "stat"),
        ("Placements and failures by reason", "ops", [
            ('sum(rate(dais_scheduler_placements_total[$__rate_interval]))', "placed"),
            ('sum by (reason) (rate(dais_scheduler_placement_failures_total[$__rate_interval]))',
             "failed: {{reason}}")], "timeseries"),
        ("GPUs: unallocated and fragmented", "none", [
            ('max(dais_scheduler_unallocated_gpus and on (instance, job) (dais_scheduler_leader == 1))',
             "unallocated"),
            ('max(dais_scheduler_fragmented_gpus and on (instance, job) (dais_scheduler_leader == 1))',
             "fragmented")], "timeseries"),
        ("Rollout decisions by route", "none", [
            ('sum by (route, decision) (increase(dais_rollout_decisions_total[$__range]))',
             "{{route}} {{decision}}")], "timeseries"),
        ("Reconcile p99", "s", [
            ('histogram_quantile(0.99, sum by (le) (rate(dais_scheduler_reconcile_duration_seconds_bucket[$__rate_interval])))',
             "p99")], "timeseries"),
    ]),
    ("Features and memory", [
        ("Feature values by status", "ops", [
            ('sum by (status) (rate(dais_feature_values_total[$__rate_interval]))', "{{status}}")],
         "timeseries"),
        ("Feature miss ratio (P2 at 5 %)", "percentunit", [
            ('sum(rate(dais_feature_values_total{status!="present"}[$__rate_interval])) / sum(rate(dais_feature_values_total[$__rate_interval]))',
             "misses")], "timeseries"),
        ("Feature lookup p99 by tier", "s", [
            ('histogram_quantile(0.99, sum by (le, tier) (rate(dais_feature_lookup_duration_seconds_bucket[$__rate_interval])))',
             "{{tier}}")], "timeseries"),
        ("Vector memory search p99 by collection", "s", [
            ('histogram_quantile(0.99, sum by (le, collection) (rate(dais_memory_search_duration_seconds_bucket[$__rate_interval])))',
             "{{collection}}")], "timeseries"),
    ]),
    ("Transactions and dependencies", [
        ("Transactions/s by outcome", "ops", [
            ('sum by (outcome) (rate(dais_txn_transactions_total[$__rate_interval]))',
             "{{outcome}}")], "timeseries"),
        ("In doubt: count and oldest age", "s", [
            ('max(dais_txn_in_doubt_oldest_age_seconds)', "oldest age"),
            ('sum(dais_txn_in_doubt_transactions)', "in doubt")], "timeseries"),
        ("etcd reachable (by process)", "none", [
            ('min by (instance) (dais_etcd_reachable)', "{{instance}}")], "timeseries"),
        ("Redis connect errors/s", "ops", [
            ('sum by (instance) (rate(dais_redis_errors_total{kind="connect"}[$__rate_interval]))',
             "{{instance}}")], "timeseries"),
    ]),
]


def dashboard():
    panels, pid, y = [], 1, 0
    for row, row_panels in ROWS:
        panels.append({"type": "row", "title": row, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        pid, y, x = pid + 1, y + 1, 0
        for title, unit, queries, kind in row_panels:
            w = 6 if kind == "stat" else 12
            if x + w > 24:
                x, y = 0, y + 8
            panels.append({
                "type": kind, "title": title, "id": pid, "datasource": DS,
                "gridPos": {"h": 8, "w": w, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}}
                if kind == "timeseries" else {"reduceOptions": {"calcs": ["lastNotNull"]}},
                "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": expr,
                             "legendFormat": legend} for i, (expr, legend) in enumerate(queries)],
            })
            pid, x = pid + 1, x + w
        y += 8
    return {
        "title": "dais cluster", "uid": "dais-overview", "editable": True, "schemaVersion": 36,
        "tags": ["dais"], "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "dais-overview.json"
    out.write_text(json.dumps(dashboard(), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
