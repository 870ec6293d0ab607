"""etcd over TLS with client certificates (issue 17, docs/tls.md): `dais ctl` and `dais node`
with --etcd-cacert / --etcd-cert / --etcd-key against a real etcd started with --cert-file and
--client-cert-auth; without a client certificate the command fails and says why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, EtcdServer, wait_for


@pytest.fixture
def certs(tmp_path) -> Path:
    d = tmp_path / "certs"
    subprocess.run([str(REPO_ROOT / "scripts" / "make_certs.sh"), str(d)], check=True,
                   capture_output=True, timeout=60)
    return d


@pytest.fixture
def tls_etcd(tmp_path, certs):
    srv = EtcdServer(tmp_path, tls=certs)
    yield srv
    srv.stop()


def etcd_tls_args(etcd, certs, client=True):
    args = ["--etcd", etcd.url, "--etcd-cacert", str(certs / "ca.crt")]
    if client:
        args += ["--etcd-cert", str(certs / "client.crt"), "--etcd-key", str(certs / "client.key")]
    return args


def test_ctl_and_node_over_tls_with_client_certificates(tls_etcd, certs, dais_bin, model_repo,
                                                         start_server):
    spec = "name: small\nmodel: mlp_small\nreplicas: 1\n"
    path = certs.parent / "small.yaml"
    path.write_text(spec)
    r = subprocess.run([str(dais_bin), "ctl", *etcd_tls_args(tls_etcd, certs), "apply", "-f",
                        str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "/dais/deployments/small" in tls_etcd.get_prefix("/dais/deployments/")

    start_server(model_repo, *etcd_tls_args(tls_etcd, certs), "--node-id", "n1",
                 "--lease-ttl-secs", "2", command="node")
    reg = wait_for(lambda: tls_etcd.get_prefix("/dais/nodes/"), 15, "registration over TLS")
    assert json.loads(reg["/dais/nodes/n1"])["node"] == "n1"

    r = subprocess.run([str(dais_bin), "ctl", *etcd_tls_args(tls_etcd, certs), "get", "nodes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "n1" in r.stdout, r.stdout + r.stderr


def test_without_a_client_certificate_etcd_refuses_and_ctl_says_so(tls_etcd, certs, dais_bin):
    r = subprocess.run([str(dais_bin), "ctl", *etcd_tls_args(tls_etcd, certs, client=False),
                        "get", "nodes"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "etcd" in r.stderr.lower(), r.stderr
    # A plain-text client against the TLS etcd fails as well (no silent downgrade).
    r = subprocess.run([str(dais_bin), "ctl", "--etcd", tls_etcd.endpoint, "get", "nodes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
