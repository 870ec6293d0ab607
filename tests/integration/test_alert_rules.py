"""The Prometheus files in deploy/prometheus, checked and unit-tested with promtool.

promtool comes from Debian's `prometheus` package (scripts/setup.sh). Without it these tests are
skipped, unless DAIS_REQUIRE_PROMTOOL is set (to anything but "0"), in which case they fail.
They need no dais binary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROM_DIR = REPO_ROOT / "deploy" / "prometheus"
RULES = PROM_DIR / "dais-alerts.yml"
RULES_TEST = PROM_DIR / "dais-alerts.test.yml"
CONFIG = PROM_DIR / "prometheus.yml"
EXPECTED_ALERTS = {"DaisModelP99LatencyHigh", "DaisModelFailureRatioHigh", "DaisModelNotReady",
                   "DaisServerDown", "DaisFeatureMissRateHigh", "DaisTxnInDoubt",
                   "DaisTlsCertificateExpiringSoon", "DaisGatewayErrorRatioHigh",
                   "DaisGatewayP99LatencyHigh", "DaisGatewayNodeEjected",
                   "DaisSchedulerPendingInstances", "DaisSchedulerNoLeader",
                   "DaisRolloutRolledBack", "DaisEtcdUnreachable", "DaisRedisUnreachable"}


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool"
                                        if os.access("/usr/bin/promtool", os.X_OK) else None)
    if path is None:
        msg = "promtool not found (Debian package `prometheus`)"
        if os.environ.get("DAIS_REQUIRE_PROMTOOL", "") not in ("", "0"):
            pytest.fail(msg + "; DAIS_REQUIRE_PROMTOOL is set")
        pytest.skip(msg)
    return path


def run_promtool(promtool: str, *args: str) -> str:
    cmd = [promtool, *args]
    r = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    out = f"$ {' '.join(cmd)}  (exit {r.returncode})\n{r.stdout}\n{r.stderr}"
    print(out)
    assert r.returncode == 0, f"promtool failed:\n{out}"
    return r.stdout + r.stderr


def test_check_rules(promtool):
    out = run_promtool(promtool, "check", "rules", str(RULES.relative_to(REPO_ROOT)))
    assert f"SUCCESS: {len(EXPECTED_ALERTS)} rules found" in out, out


def test_check_config(promtool):
    # rule_files in prometheus.yml are relative to its directory; promtool resolves them so,
    # and checks the rules file too.
    out = run_promtool(promtool, "check", "config", str(CONFIG.relative_to(REPO_ROOT)))
    assert "SUCCESS: 1 rule files found" in out, out
    assert "is valid prometheus config file syntax" in out, out


def test_rules_unit_tests(promtool):
    out = run_promtool(promtool, "test", "rules", str(RULES_TEST.relative_to(REPO_ROOT)))
    assert "SUCCESS" in out and "FAILED" not in out, out


def test_every_rule_has_firing_and_silent_cases():
    """Without promtool: each alert has a test where it fires and one where it stays silent."""
    rules = RULES.read_text()
    names = set(re.findall(r"^\s*- alert:\s*(\w+)\s*$", rules, re.M))
    assert names == EXPECTED_ALERTS
    tests = RULES_TEST.read_text()
    # alert_rule_test entries: "alertname: X" followed by "exp_alerts: []" or a non-empty list.
    cases = re.findall(r"alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*(\[\])?", tests)
    assert cases
    for name in sorted(names):
        kinds = {bool(empty) for n, empty in cases if n == name}
        assert kinds == {True, False}, f"{name}: needs a firing and a silent test case"
    assert {n for n, _ in cases} <= names, "test file names an alert that has no rule"
