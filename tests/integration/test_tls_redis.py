"""Redis over TLS (issue 17, docs/tls.md): dais serve's feature store, its L1 invalidation
subscriber and a Redis Cluster, against real redis-server processes listening with TLS only
(tls-port, certificates from scripts/make_certs.sh; the cluster bus over TLS too). A Redis whose
certificate the client does not trust is a clear connect error, and the server stays up."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from conftest import RedisCluster, RedisServer, make_certs
from test_features_redis import shop_repo  # noqa: F401 (fixture)

FEATURES = ["user_profile:age", "user_profile:clicks"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return make_certs(tmp_path_factory.mktemp("redis-certs"))


@pytest.fixture(scope="module")
def tls_redis(certs, tmp_path_factory):
    r = RedisServer(tmp_path_factory.mktemp("redis-tls"), tls=certs)
    yield r
    r.stop()


def push_and_read(srv, kv, ids):
    now = int(time.time())
    body = kv.push(srv, "user_profile", {"user_id": ids, "event_timestamp": [now] * len(ids),
                                         "age": [float(i % 90) for i in ids],
                                         "clicks": [[float(i % 7)] * 15 for i in ids]})
    assert body == {"written": len(ids), "skipped_older": 0}, body
    cols = kv.feast_columns(kv.get_online(srv, FEATURES, {"user_id": ids}))
    assert cols["age"]["statuses"] == ["PRESENT"] * len(ids), cols["age"]["statuses"]
    assert cols["age"]["values"] == [float(i % 90) for i in ids]


def test_feature_store_and_invalidations_over_tls(start_server, shop_repo, tls_redis, certs, kv):
    args = ["--redis", f"rediss://{tls_redis.addr}", "--redis-tls-ca", certs / "ca.crt",
            "--feature-l1-ttl-ms", "60000"]
    a = start_server(shop_repo, *args)
    b = start_server(shop_repo, *args)
    h = a.get("/healthz").json()
    assert h["checks"]["feature_store"] == {"ok": True, "tier": "redis"}, h
    push_and_read(a, kv, [1, 2, 3])
    # What a wrote is in Redis (read here over TLS by the fixture's own client).
    assert tls_redis.call("EXISTS", kv.shop_key(1)) == 1
    # b caches user 1 for a minute; a's new push reaches it through the invalidation channel
    # (pub/sub over TLS) at once.
    cols = kv.feast_columns(kv.get_online(b, FEATURES, {"user_id": [1]}))
    assert cols["age"]["values"] == [1.0]
    kv.push(a, "user_profile", {"user_id": [1], "event_timestamp": [int(time.time()) + 5],
                                "age": [42.0], "clicks": [[0.0] * 15]})
    b.wait_until(lambda: kv.feast_columns(kv.get_online(b, FEATURES, {"user_id": [1]}))
                 ["age"]["values"] == [42.0], 10, "the invalidation over TLS")


def test_untrusted_redis_certificate_is_a_clear_error(start_server, shop_repo, tls_redis, certs):
    srv = start_server(shop_repo, "--redis", tls_redis.addr, "--redis-tls-ca",
                       certs / "other-ca.crt", "--redis-connect-timeout-ms", "2000",
                       wait_ready=False)
    srv.wait_until(lambda: "TLS handshake: unknown_ca" in srv.log_text(), 20,
                   "the handshake error logged")
    assert srv.get("/healthz").status_code == 503
    assert srv.running()


def test_plain_client_on_tls_redis_fails_cleanly(start_server, shop_repo, tls_redis):
    srv = start_server(shop_repo, "--redis", tls_redis.addr, "--redis-connect-timeout-ms",
                       "500", wait_ready=False)
    srv.wait_until(lambda: srv.get("/healthz").status_code == 503, 20, "503 without TLS")
    assert srv.running()


def test_redis_cluster_over_tls(start_server, shop_repo, certs, tmp_path, kv):
    cluster = RedisCluster(tmp_path / "cluster", tls=certs)
    try:
        srv = start_server(shop_repo, "--redis", cluster.seeds, "--redis-tls",
                           "--redis-tls-ca", certs / "ca.crt", "--feature-l1-ttl-ms", "1",
                           "--feature-negative-ttl-ms", "1", "--feature-lookup-timeout-ms",
                           "2000")
        ids = list(range(5000, 5100))
        push_and_read(srv, kv, ids)
        owners = {cluster.owner_of_key(kv.shop_key(i)).port for i in ids}
        assert len(owners) == 3, "100 entities should spread over the 3 masters"
    finally:
        cluster.stop()
