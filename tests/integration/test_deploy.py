"""deploy/: the systemd units pass `systemd-analyze verify` (with ExecStart pointing at the
binary under test), and scripts/local_cluster.sh brings up etcd, 3 nodes and 2 schedulers,
applies deploy/examples and sees every instance READY."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_systemd_units_verify(dais_bin, tmp_path):
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze not found (Debian: systemd)"
    units = sorted((REPO_ROOT / "deploy" / "systemd").glob("*.service"))
    assert {u.name for u in units} == {"dais-etcd.service", "dais-node.service",
                                       "dais-scheduler.service", "dais-gateway.service",
                                       "dais-console.service"}
    for u in units:
        (tmp_path / u.name).write_text(u.read_text().replace("/usr/bin/dais",
                                                              str(dais_bin)))
    r = subprocess.run([tool, "verify", *[str(tmp_path / u.name) for u in units]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Unknown" not in r.stderr and "not executable" not in r.stderr, r.stderr


def test_local_cluster_script(dais_bin, model_repo):
    build = Path(dais_bin).parents[2]  # <build>/src/cmd/dais
    r = subprocess.run([str(REPO_ROOT / "scripts" / "local_cluster.sh"), "--repository",
                        str(model_repo), "--build", str(build)],
                       capture_output=True, text=True, timeout=240, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 of 4 instances READY" in r.stdout, r.stdout
    assert "ranker" in r.stdout and "fraud" in r.stdout
