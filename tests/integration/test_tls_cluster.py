"""etcd over TLS with client certificates (issue 17, docs/tls.md): `dais ctl` and `dais node`
with --etcd-cacert / --etcd-cert / --etcd-key against a real etcd started with --cert-file and
--client-cert-auth; without a client certificate the command fails and says why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import EtcdServer, make_certs, wait_for


@pytest.fixture
def certs(tmp_path) -> Path:
    return make_certs(tmp_path / "certs")


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


def test_gateway_to_nodes_over_mutual_tls(etcd_server, certs, dais_bin, repo_copy, start_server,
                                          tmp_path):
    """A node that only accepts mutual TLS (HTTP and gRPC), a gateway with a client certificate
    (--upstream-tls-*) and its own gRPC port over TLS: requests through it over HTTP and gRPC
    reach the node; a gateway without a client certificate gets no answer from the node and
    says why."""
    import grpc
    import requests

    import grpc_client
    from cluster_util import Gateway, ctl, instances
    from grpc_client import GrpcClient

    tls = []
    for p in ("http", "grpc"):
        tls += [f"--{p}-use-ssl-mutual", "true", f"--{p}-server-cert", str(certs / "server.crt"),
                f"--{p}-server-key", str(certs / "server.key"), f"--{p}-root-cert",
                str(certs / "ca.crt")]
    node = start_server(repo_copy, "--etcd", etcd_server.endpoint, "--node-id", "n1",
                        "--lease-ttl-secs", "2", *tls, command="node")
    etcd_server.ctl("put", "/dais/assignments/n1/mlp_small", json.dumps(
        {"deployment": "ranker", "model": "mlp_small", "version": 1}))
    wait_for(lambda: [i["state"] for i in instances(etcd_server, "mlp_small").values()] ==
             ["READY"], 60, "mlp_small READY on n1")
    route = tmp_path / "route.yaml"
    route.write_text("kind: route\nname: ranker\nmodel: mlp_small\n"
                     "versions: [{version: 1, weight: 100}]\nstable: 1\n")
    ctl(dais_bin, etcd_server, "apply", "-f", str(route))
    body = {"inputs": [{"name": "INPUT__0", "shape": [1, 16], "datatype": "FP32",
                        "data": [0.0] * 16}]}

    good = Gateway(dais_bin, etcd_server, tmp_path, "--upstream-tls-ca", certs / "ca.crt",
                   "--upstream-tls-cert", certs / "client.crt", "--upstream-tls-key",
                   certs / "client.key", "--grpc-use-ssl", "true", "--grpc-server-cert",
                   certs / "server.crt", "--grpc-server-key", certs / "server.key", name="good")
    bad = Gateway(dais_bin, etcd_server, tmp_path, "--upstream-tls-ca", certs / "ca.crt",
                  name="bad")
    try:
        r = wait_for(lambda: (lambda r: r if r.status_code == 200 else None)(
            requests.post(good.url + "/v2/models/ranker/infer", json=body, timeout=10)), 20,
            "an answer through the gateway over mutual TLS")
        assert r.json()["model_name"] == "mlp_small"
        stubs = grpc_client.generate_stubs(tmp_path / "stubs")
        c = GrpcClient(stubs, good.grpc_port, credentials=grpc.ssl_channel_credentials(
            (certs / "ca.crt").read_bytes()))
        out = c.stub.ModelInfer(c.request("ranker", {"INPUT__0": np.zeros((1, 16), "f4")}),
                                timeout=10)
        assert out.model_name == "mlp_small" and out.raw_output_contents
        c.close()

        r = requests.post(bad.url + "/v2/models/ranker/infer", json=body, timeout=10)
        assert r.status_code in (502, 503), r.text
        assert "certificate required" in r.text, r.text  # the node's TLS alert, named
        wait_for(lambda: "TLS handshake on http from 127.0.0.1 failed: no_client_certificate" in
                 node.log_text(), 10, "the node's log line")
    finally:
        good.stop()
        bad.stop()
