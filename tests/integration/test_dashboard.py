"""Issue 35: the Grafana dashboard in deploy/grafana is what scripts/gen_dashboard.py writes,
every query parses (a real Prometheus answers it) and names only metrics dais exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from cluster_util import Prometheus
from conftest import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dais-overview.json"


def exported_metrics() -> set[str]:
    """Every metric family dais registers (a quoted "dais_..." name in src/), with the series a
    histogram adds."""
    names = set()
    for path in (REPO_ROOT / "src").rglob("*.cc"):
        if path.name.endswith("_test.cc"):
            continue
        names.update(re.findall(r'"(dais_[a-z0-9_]+)"', path.read_text(errors="replace")))
    return names | {n + s for n in names for s in ("_bucket", "_sum", "_count")}


def queries():
    board = json.loads(DASHBOARD.read_text())
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def test_dashboard_is_generated_from_the_script(tmp_path):
    out = tmp_path / "board.json"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "gen_dashboard.py"), str(out)],
                   check=True, capture_output=True)
    assert out.read_text() == DASHBOARD.read_text(), \
        "deploy/grafana/dais-overview.json is stale: run scripts/gen_dashboard.py"


def test_every_query_names_exported_metrics():
    exported = exported_metrics()
    assert "dais_gateway_requests_total" in exported and "dais_request_duration_seconds" in \
        exported, "the source scan found no metric names"
    seen = set()
    for title, expr in queries():
        names = set(re.findall(r"\bdais_[a-z0-9_]+", expr))
        assert names, f"{title}: {expr} names no dais metric"
        unknown = names - exported
        assert not unknown, f"panel {title!r} queries {unknown}, which dais does not export"
        seen |= names
    # The areas the issue asks for: node, gateway, scheduler, rollouts, features, txn.
    for prefix in ("dais_inference_", "dais_gateway_", "dais_scheduler_", "dais_rollout_",
                   "dais_feature_", "dais_txn_"):
        assert any(n.startswith(prefix) for n in seen), f"no panel on {prefix}*"


def test_every_query_parses_in_a_real_prometheus(tmp_path):
    prom = Prometheus(free_port(), [], tmp_path)
    try:
        for title, expr in queries():
            q = expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            prom.api("query", query=q)  # raises on HTTP 400 (a parse error)
    finally:
        prom.stop()
