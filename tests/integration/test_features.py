"""The online feature store without Redis (the in-process memory tier): the Feast endpoints
(/push, /get-online-features) with their statuses and event times, write ordering by event time,
max-age staleness, schema-version and tenant (domain) isolation, spec errors (beside a model and
on the command line), bad requests, and feature-enriched inference over HTTP and gRPC checked
against the same TorchScript file run with torch on the feature vectors that were pushed.

The shared server (`feat`) serves a copy of mlp_small named shop_mlp whose features.yaml fills
INPUT__0 [16] with user_profile age (1) + clicks (15), entity input USER_ID, plus two standalone
--feature-spec files (domains tenant_a and tenant_b). Tests use disjoint entity ids.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import grpc
import numpy as np
import pytest

import grpc_client
from grpc_client import GrpcClient, decode_outputs

TOL = dict(rtol=1e-5, atol=1e-5)
FEATURES = ["user_profile:age", "user_profile:clicks"]

TENANT_SPEC = """\
domain: {domain}
entities: [{{name: account_id, key_type: string}}]
feature_groups:
  - name: account
    entity: account_id
    version: 1
    features:
      - {{name: balance, dtype: FP64, default: -1}}
      - {{name: flags, dtype: INT32, shape: [2], default: [7, 8]}}
"""


def clicks_of(seed: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=15).astype(np.float32).tolist()


def vector(age, clicks) -> np.ndarray:
    return np.asarray([age, *clicks], np.float32)


DEFAULT_VECTOR = np.zeros(16, np.float32)

# A string-keyed entity whose FP64 and INT32 features are converted into mlp_small's FP32 input.
WALLET_SPEC = """\
domain: bank
entities: [{name: account, key_type: string}]
feature_groups:
  - name: wallet
    entity: account
    features:
      - {name: score, dtype: FP64, shape: [8], default: 0.5}
      - {name: counts, dtype: INT32, shape: [8], default: [1, 2, 3, 4, 5, 6, 7, 8]}
inputs: [{name: INPUT__0, features: [wallet:score, wallet:counts]}]
entity_input: ACCOUNT
"""
WALLET_DEFAULT = np.asarray([0.5] * 8 + list(range(1, 9)), np.float32)


def metric(srv, kv, name, **labels) -> float:
    return kv.metric_value(kv.parse_prometheus(srv.metrics()), name, **labels) or 0.0


# --------------------------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(scope="module")
def feat_repo(model_repo, tmp_path_factory, kv):
    root = tmp_path_factory.mktemp("features")
    repo = root / "repo"
    repo.mkdir()
    kv.add_feature_model(model_repo, repo, "shop_mlp", kv.shop_spec(model=True))
    kv.add_feature_model(model_repo, repo, "wallet_mlp", WALLET_SPEC)
    specs = []
    for domain in ("tenant_a", "tenant_b"):
        p = root / f"{domain}.yaml"
        p.write_text(TENANT_SPEC.format(domain=domain))
        specs += ["--feature-spec", str(p)]
    return repo, specs


@pytest.fixture(scope="module")
def feat(start_module_server, feat_repo):
    repo, specs = feat_repo
    return start_module_server(repo, *specs)


@pytest.fixture(scope="module")
def model_file(feat_repo):
    return feat_repo[0] / "shop_mlp" / "1" / "model.pt"


@pytest.fixture(scope="module")
def feature_stubs(tmp_path_factory):
    return grpc_client.generate_stubs(tmp_path_factory.mktemp("feature_grpc_stubs"))


# --------------------------------------------------------------------------------------------
# The Feast API.


def test_push_then_get(feat, kv):
    now = time.time()
    t1, t2 = int(now) - 60, int(now) - 120
    c1, c2 = clicks_of(1), clicks_of(2)
    before = kv.parse_prometheus(feat.metrics())
    body = kv.push(feat, "user_profile", {
        "user_id": [1001, "1002"],
        "event_timestamp": [kv.iso(t1), t2],  # ISO-8601 and epoch seconds
        "age": [31.5, 42],
        "clicks": [c1, c2],
    })
    assert body == {"written": 2, "skipped_older": 0}, body

    # "01001" is the same int64 entity as 1001; 1999 was never pushed.
    resp = kv.get_online(feat, FEATURES, {"user_id": [1001, "01001", 1002, 1999]})
    assert resp["metadata"]["feature_names"] == ["user_id", "age", "clicks"], resp
    cols = kv.feast_columns(resp)
    assert cols["user_id"]["values"] == [1001, "01001", 1002, 1999], "entity ids are echoed"
    age, clicks = cols["age"], cols["clicks"]
    assert age["statuses"] == ["PRESENT", "PRESENT", "PRESENT", "NOT_FOUND"], age
    assert clicks["statuses"] == age["statuses"], clicks
    assert age["values"][:3] == [31.5, 31.5, 42.0] and age["values"][3] is None, age
    np.testing.assert_allclose(clicks["values"][0], c1, rtol=1e-6)
    np.testing.assert_allclose(clicks["values"][1], c1, rtol=1e-6)
    np.testing.assert_allclose(clicks["values"][2], c2, rtol=1e-6)
    assert clicks["values"][3] is None, clicks
    assert age["event_timestamps"][:3] == [kv.iso(t1), kv.iso(t1), kv.iso(t2)], age
    assert clicks["event_timestamps"][:3] == age["event_timestamps"][:3]

    full = kv.get_online(feat, ["user_profile:age"], {"user_id": [1002]}, full_names=True)
    assert full["metadata"]["feature_names"] == ["user_id", "user_profile__age"], full
    assert full["results"][1]["values"] == [42.0], full

    after = kv.parse_prometheus(feat.metrics())

    def delta(status):
        labels = dict(domain="shop", group="user_profile", status=status)
        return ((kv.metric_value(after, "dais_feature_values_total", **labels) or 0)
                - (kv.metric_value(before, "dais_feature_values_total", **labels) or 0))

    # Counted per (row, group): 3 + 1 present rows, 1 not found.
    assert delta("present") == 4 and delta("not_found") == 1, (delta("present"),
                                                               delta("not_found"))


def test_older_write_never_overwrites_newer(feat, kv):
    now = int(time.time())
    new_t, old_t = now - 10, now - 100
    row = lambda t, age: {"user_id": [1101], "event_timestamp": [t], "age": [age],
                          "clicks": [[age] * 15]}
    assert kv.push(feat, "user_profile", row(new_t, 2.0)) == {"written": 1, "skipped_older": 0}
    assert kv.push(feat, "user_profile", row(old_t, 1.0)) == {"written": 0, "skipped_older": 1}
    cols = kv.feast_columns(kv.get_online(feat, FEATURES, {"user_id": [1101]}))
    assert cols["age"]["values"] == [2.0] and cols["clicks"]["values"] == [[2.0] * 15], cols
    assert cols["age"]["event_timestamps"] == [kv.iso(new_t)]

    # Within one push too: the newer row wins whatever the order.
    body = kv.push(feat, "user_profile", {"user_id": [1102, 1102], "event_timestamp":
                                          [now - 5, now - 50], "age": [5, 50],
                                          "clicks": [[5] * 15, [50] * 15]})
    assert body["written"] + body["skipped_older"] == 2 and body["skipped_older"] >= 1, body
    cols = kv.feast_columns(kv.get_online(feat, ["user_profile:age"], {"user_id": [1102]}))
    assert cols["age"]["values"] == [5.0], cols

    # A newer write does replace it.
    assert kv.push(feat, "user_profile", row(now - 1, 3.0))["written"] == 1
    cols = kv.feast_columns(kv.get_online(feat, ["user_profile:age"], {"user_id": [1101]}))
    assert cols["age"]["values"] == [3.0], cols


def test_max_age_staleness(feat, kv):
    old = int(time.time()) - 2 * 3600  # max_age is 1h
    kv.push(feat, "user_profile", {"user_id": [1201], "event_timestamp": [kv.iso(old)],
                                   "age": [77], "clicks": [[1] * 15]})
    cols = kv.feast_columns(kv.get_online(feat, FEATURES, {"user_id": [1201]}))
    assert cols["age"]["statuses"] == ["OUTSIDE_MAX_AGE"], cols
    assert cols["age"]["values"] == [77.0], "a stale value is shown, as Feast does"
    assert cols["clicks"]["values"] == [[1.0] * 15]
    assert cols["age"]["event_timestamps"] == [kv.iso(old)]


def test_value_ages_out_while_cached(feat, kv):
    """A record read into L1 while fresh turns OUTSIDE_MAX_AGE when its max age passes, though
    L1 still holds it (and enrichment then uses the defaults)."""
    t = time.time() - 3600 + 1.0  # 1 s of max age left
    kv.push(feat, "user_profile", {"user_id": [1251], "event_timestamp": [t], "age": [8],
                                   "clicks": [None]})
    cols = kv.feast_columns(kv.get_online(feat, ["user_profile:age"], {"user_id": [1251]}))
    assert cols["age"]["statuses"] == ["PRESENT"], cols
    time.sleep(1.3)
    cols = kv.feast_columns(kv.get_online(feat, ["user_profile:age"], {"user_id": [1251]}))
    assert cols["age"]["statuses"] == ["OUTSIDE_MAX_AGE"] and cols["age"]["values"] == [8.0]
    r = feat.infer("shop_mlp", [], parameters={"entity_ids": [1251]})
    kv.json_outputs(r)
    assert r.json()["parameters"]["feature_status"] == "STALE", r.json()


def test_not_found_is_null(feat, kv):
    cols = kv.feast_columns(kv.get_online(feat, FEATURES, {"user_id": [1301, 1302]}))
    for name in ("age", "clicks"):
        assert cols[name]["values"] == [None, None], cols[name]
        assert cols[name]["statuses"] == ["NOT_FOUND", "NOT_FOUND"], cols[name]


def test_tenant_isolation(feat, kv):
    now = int(time.time())
    kv.push(feat, "account", {"account_id": ["acc-1"], "event_timestamp": [now],
                              "balance": [12.25], "flags": [[1, 2]]}, project="tenant_a")
    a = kv.feast_columns(kv.get_online(feat, ["account:balance", "account:flags"],
                                       {"account_id": ["acc-1"]}, project="tenant_a"))
    assert a["balance"]["statuses"] == ["PRESENT"] and a["balance"]["values"] == [12.25], a
    assert a["flags"]["values"] == [[1, 2]], a
    b = kv.feast_columns(kv.get_online(feat, ["account:balance", "account:flags"],
                                       {"account_id": ["acc-1"]}, project="tenant_b"))
    assert b["balance"]["statuses"] == ["NOT_FOUND"] and b["balance"]["values"] == [None], b

    kv.push(feat, "account", {"account_id": ["acc-1"], "event_timestamp": [now],
                              "balance": [-3.5], "flags": [None]}, project="tenant_b")
    b = kv.feast_columns(kv.get_online(feat, ["account:balance", "account:flags"],
                                       {"account_id": ["acc-1"]}, project="tenant_b"))
    assert b["balance"]["values"] == [-3.5], b
    assert b["flags"]["values"] == [[7, 8]], "a null feature in a push stores its default"
    a = kv.feast_columns(kv.get_online(feat, ["account:balance"], {"account_id": ["acc-1"]},
                                       project="tenant_a"))
    assert a["balance"]["values"] == [12.25], "tenant_b's push changed tenant_a's record"

    # The group exists in both domains: without "project" the request is ambiguous.
    r = feat.post("/get-online-features", json={"features": ["account:balance"],
                                                "entities": {"account_id": ["acc-1"]}})
    assert r.status_code == 400 and "project" in kv.error_text(r), r.text
    r = feat.post("/push", json={"push_source_name": "account", "df": {
        "account_id": ["acc-1"], "event_timestamp": [now], "balance": [1], "flags": [[0, 0]]}})
    assert r.status_code == 400 and "project" in kv.error_text(r), r.text
    r = feat.post("/get-online-features", json={"features": ["account:balance"], "entities": {
        "account_id": ["acc-1"]}, "project": "tenant_c"})
    assert r.status_code == 400 and "tenant_c" in kv.error_text(r), r.text


def test_schema_version_isolation(start_server, model_repo, tmp_path, kv, refs):
    """Two models declare the same domain and group at versions 1 and 2: a record of one version
    is invisible to the other (its own key), to the Feast API and to enrichment alike."""
    repo = tmp_path / "repo"
    repo.mkdir()
    kv.add_feature_model(model_repo, repo, "shop_v1", kv.shop_spec(version=1, model=True))
    kv.add_feature_model(model_repo, repo, "shop_v2",
                         kv.shop_spec(version=2, age_default=5, model=True))
    srv = start_server(repo)
    now = int(time.time())
    clicks = clicks_of(7)
    kv.push(srv, "user_profile", {"user_id": [42], "event_timestamp": [now], "age": [9],
                                  "clicks": [clicks]})
    seen = {}
    for model in ("shop_v1", "shop_v2"):
        cols = kv.feast_columns(kv.get_online(srv, entities={"user_id": [42]}, service=model))
        seen[model] = cols["age"]["statuses"][0]
    # /push with a bare group name writes one version (the one /get-online-features with the
    # same group name reads); the other version does not see it.
    assert sorted(seen.values()) == ["NOT_FOUND", "PRESENT"], seen
    plain = kv.feast_columns(kv.get_online(srv, ["user_profile:age"], {"user_id": [42]}))
    assert plain["age"]["statuses"] == ["PRESENT"], plain
    for model, status in seen.items():
        default_age = 5 if model == "shop_v2" else 0
        x = vector(9, clicks) if status == "PRESENT" else vector(default_age, [0] * 15)
        r = srv.infer(model, [], parameters={"entity_ids": [42]})
        out = kv.json_outputs(r)
        assert r.json()["parameters"]["feature_status"] == status, r.json()
        np.testing.assert_allclose(out["OUTPUT__0"],
                                   refs.torch(repo / model / "1" / "model.pt", x[None]), **TOL)


def test_offline_root_loaded_at_start(start_server, model_repo, tmp_path, kv):
    """Without --redis the latest dt= partition of each group under --feature-offline-root is
    loaded at start (bad rows skipped); access counts are written under <root>/_access/."""
    repo = tmp_path / "repo"
    repo.mkdir()
    kv.add_feature_model(model_repo, repo, "shop_mlp", kv.shop_spec(model=True))
    root = tmp_path / "offline"
    now = time.time()
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    older = time.strftime("%Y-%m-%d", time.gmtime(now - 3 * 86400))
    old_part = root / "user_profile" / f"dt={older}"
    old_part.mkdir(parents=True)
    (old_part / "part-0.csv").write_text(
        f"user_id,event_timestamp,age,clicks\n5001,{kv.iso(now - 3 * 86400)},1,\n"
        f"5002,{kv.iso(now - 3 * 86400)},2,\n")
    part = root / "user_profile" / f"dt={today}"
    part.mkdir(parents=True)
    clicks = "[" + ", ".join(str(float(i)) for i in range(15)) + "]"
    (part / "part-0.csv").write_text(
        "user_id,age,event_timestamp,clicks\n"
        f'5001,41.5,{kv.iso(now - 60)},"{clicks}"\n'
        f"5003,not-a-number,{kv.iso(now - 60)},\n"  # a bad row: skipped
        f"5004,44,{kv.iso(now - 60)},\n")
    (part / "part-1.jsonl").write_text(json.dumps(
        {"user_id": 5005, "event_timestamp": int((now - 30) * 1000), "age": 45}) + "\n")
    (part / "_SUCCESS").write_text("")
    srv = start_server(repo, "--feature-offline-root", str(root), "--node-id", "node-a")
    cols = kv.feast_columns(kv.get_online(srv, FEATURES,
                                          {"user_id": [5001, 5002, 5003, 5004, 5005]}))
    assert cols["age"]["statuses"] == ["PRESENT", "NOT_FOUND", "NOT_FOUND", "PRESENT",
                                       "PRESENT"], cols["age"]
    assert cols["age"]["values"] == [41.5, None, None, 44.0, 45.0], cols["age"]
    assert cols["clicks"]["values"][0] == [float(i) for i in range(15)]
    assert cols["clicks"]["values"][3] == [0.0] * 15, "an empty field is the default"
    assert srv.stop() == 0
    access = root / "_access" / f"dt={today}" / "node-a.tsv"
    assert access.is_file(), f"no access counts at {access}: {list(root.rglob('*'))}"
    text = access.read_text()
    assert "5001" in text and "5005" in text, text[:500]


def test_features_yaml_edit_reloads_model(start_server, model_repo, tmp_path, kv):
    """In poll mode an edited features.yaml reloads the model with the new schema (here a new
    version: the old records are no longer seen); a broken edit leaves the last good one
    serving and is reported in the index."""
    repo = tmp_path / "repo"
    repo.mkdir()
    d = kv.add_feature_model(model_repo, repo, "shop_mlp", kv.shop_spec(model=True))
    srv = start_server(repo, "--model-control-mode", "poll", "--repository-poll-secs", "1")
    kv.push(srv, "user_profile", {"user_id": [1], "event_timestamp": [time.time()], "age": [4],
                                  "clicks": [None]})

    def status():
        body = kv.get_online(srv, entities={"user_id": [1]}, service="shop_mlp")
        return kv.feast_columns(body)["age"]["statuses"][0]
    assert status() == "PRESENT"
    (d / "features.yaml").write_text(kv.shop_spec(model=True, version=2))
    srv.wait_until(lambda: status() == "NOT_FOUND", 15, "the v2 schema to be served")

    (d / "features.yaml").write_text(kv.shop_spec(model=True, version=2) + "inputs: [\n")

    def reported():
        return any(e.get("state") == "UNAVAILABLE" and "features.yaml" in (e.get("reason") or "")
                   for e in srv.index() if e.get("name") == "shop_mlp")
    srv.wait_until(reported, 15, "the broken features.yaml to be reported")
    assert srv.model_ready("shop_mlp")
    r = srv.infer("shop_mlp", [], parameters={"entity_ids": [1]})
    kv.json_outputs(r)
    assert r.json()["parameters"]["feature_status"] == "NOT_FOUND", r.json()


# --------------------------------------------------------------------------------------------
# Spec errors.

BAD_SPECS = {
    # model name: (features.yaml text, substrings the reason must contain)
    "bad_dtype": (lambda s: s.replace("{name: age, dtype: FP32", "{name: age, dtype: FP33"),
                  ["features.yaml", "age", "dtype", "FP33"]),
    "bad_input": (lambda s: s.replace("{name: INPUT__0,", "{name: INPUT__9,"),
                  ["features.yaml", "INPUT__9"]),
    "bad_width": (lambda s: s.replace("shape: [15]", "shape: [14]"),
                  ["features.yaml", "INPUT__0", "16", "15"]),
    "bad_field": (lambda s: s + "bogus_key: 1\n", ["features.yaml", "bogus_key"]),
    "bad_yaml": (lambda s: s + "feature_groups: [\n", ["features.yaml"]),
}


def test_bad_features_yaml_beside_model(start_server, model_repo, tmp_path, kv):
    repo = tmp_path / "repo"
    repo.mkdir()
    kv.add_feature_model(model_repo, repo, "shop_mlp", kv.shop_spec(model=True))
    for name, (mutate, _) in BAD_SPECS.items():
        kv.add_feature_model(model_repo, repo, name, mutate(kv.shop_spec(model=True)))
    srv = start_server(repo, "--strict-readiness", "false", wait_ready=False)
    idx = srv.wait_models_settled(["shop_mlp", *BAD_SPECS])
    assert idx["shop_mlp"]["state"] == "READY", idx["shop_mlp"]
    for name, (_, words) in BAD_SPECS.items():
        e = idx[name]
        assert e["state"] == "UNAVAILABLE", e
        reason = e.get("reason") or ""
        missing = [w for w in words if w not in reason]
        assert not missing, f"{name}: reason {reason!r} does not mention {missing}"
        assert str(repo / name) in reason, f"{name}: reason {reason!r} does not name the file"
        assert srv.get(f"/v2/models/{name}/ready").status_code != 200
    # The good model still enriches.
    r = srv.infer("shop_mlp", [], parameters={"entity_ids": [1]})
    kv.json_outputs(r)
    assert r.json()["parameters"]["feature_status"] == "NOT_FOUND"


@pytest.mark.parametrize("case", ["bad_dtype", "missing_file", "bad_entity"])
def test_bad_feature_spec_flag_exits(dais_bin, model_repo, tmp_path, kv, case):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(model_repo / "mlp_small", repo / "mlp_small")
    spec = tmp_path / f"{case}.yaml"
    words = [str(spec)]
    if case == "bad_dtype":
        spec.write_text(kv.shop_spec().replace("dtype: FP32, shape", "dtype: STRING, shape"))
        words += ["clicks", "dtype"]
    elif case == "bad_entity":
        spec.write_text(kv.shop_spec().replace("entity: user_id", "entity: shopper_id"))
        words += ["shopper_id"]
    r = subprocess.run([str(dais_bin), "serve", "--model-repository", str(repo),
                        "--http-port", "0", "--metrics-port", "0", "--grpc-port", "0",
                        "--feature-spec", str(spec)], capture_output=True, text=True, timeout=30)
    text = r.stdout + r.stderr
    assert r.returncode != 0, f"started with a bad --feature-spec:\n{text}"
    missing = [w for w in words if w not in text]
    assert not missing, f"the error does not mention {missing}:\n{text}"


# --------------------------------------------------------------------------------------------
# Bad requests: 400 with an "error" that names the field.

GET_CASES = {
    "unknown_entity": ({"features": FEATURES, "entities": {"shopper": [1]}}, 400, ["shopper"]),
    "int64_key_abc": ({"features": FEATURES, "entities": {"user_id": [1, "abc"]}}, 400,
                      ["entities.user_id[1]", "abc"]),
    "float_key": ({"features": FEATURES, "entities": {"user_id": [1.5]}}, 400,
                  ["entities.user_id[0]"]),
    "unknown_feature": ({"features": ["user_profile:nope"], "entities": {"user_id": [1]}}, 400,
                        ["user_profile:nope"]),
    "unknown_group": ({"features": ["no_such_group:age"], "entities": {"user_id": [1]}}, 400,
                      ["no_such_group"]),
    "no_colon": ({"features": ["age"], "entities": {"user_id": [1]}}, 400, ["age"]),
    "no_features": ({"entities": {"user_id": [1]}}, 400, ["features"]),
    "empty_entities": ({"features": FEATURES, "entities": {}}, 400, ["entities"]),
    "empty_ids": ({"features": FEATURES, "entities": {"user_id": []}}, 400, ["user_id"]),
    "unknown_service": ({"feature_service": "no_such_model", "entities": {"user_id": [1]}}, 404,
                        ["no_such_model"]),
}

PUSH_DF = {"user_id": [1], "event_timestamp": ["2026-01-01T00:00:00Z"], "age": [1],
           "clicks": [[0] * 15]}
PUSH_CASES = {
    "int64_key_abc": ({"user_id": ["abc"]}, ["df.user_id[0]", "abc"]),
    "bad_timestamp": ({"event_timestamp": ["yesterday"]}, ["df.event_timestamp[0]"]),
    "missing_column": ({"clicks": None}, ["df.clicks"]),
    "wrong_shape": ({"clicks": [[0] * 14]}, ["df.clicks[0]", "15"]),
    "not_a_number": ({"age": ["old"]}, ["df.age[0]"]),
    "ragged": ({"age": [1, 2]}, ["length"]),
    # Issue 11: a future-dated push pinned the record (every later push was "older").
    "future_event_time": ({"event_timestamp": ["2999-01-01T00:00:00Z"]},
                          ["df.event_timestamp[0]", "2999-01-01", "future"]),
    "negative_event_time": ({"event_timestamp": [-5]}, ["df.event_timestamp[0]", "negative"]),
    "unknown_column": ({"agee": [3]}, ["df.agee", "no such column"]),
    "bool_into_numeric": ({"age": [True]}, ["df.age[0]", "boolean"]),
}


def assert_error(r, status, words, kv):
    assert r.status_code == status, f"{r.status_code}: {r.text[:400]}"
    text = kv.error_text(r)
    missing = [w for w in words if w not in text]
    assert not missing, f"error {text!r} does not mention {missing}"


@pytest.mark.parametrize("case", sorted(GET_CASES))
def test_get_online_features_bad_request(feat, kv, case):
    body, status, words = GET_CASES[case]
    assert_error(feat.post("/get-online-features", json=body, timeout=10), status, words, kv)


@pytest.mark.parametrize("case", sorted(PUSH_CASES))
def test_push_bad_request(feat, kv, case):
    change, words = PUSH_CASES[case]
    df = {k: v for k, v in {**PUSH_DF, **change}.items() if v is not None}
    r = feat.post("/push", json={"push_source_name": "user_profile", "df": df}, timeout=10)
    assert_error(r, 400, words, kv)


def test_malformed_json_and_methods(feat, kv):
    for path in ("/get-online-features", "/push"):
        status, _, body = kv.raw_post(feat.http_port, path, b'{"features": [',
                                      {"Content-Type": "application/json"}, timeout=10)
        assert status == 400, (path, status, body[:300])
        assert b"error" in body, body
        r = feat.get(path, timeout=10)
        assert r.status_code == 405, (path, r.status_code, r.text[:200])
    r = feat.post("/push", json={"df": PUSH_DF}, timeout=10)
    assert_error(r, 400, ["push_source_name"], kv)
    r = feat.post("/push", json={"push_source_name": "no_such_group", "df": PUSH_DF}, timeout=10)
    assert_error(r, 400, ["no_such_group"], kv)


def test_duplicate_entity_column(feat, kv):
    """{"user_id": [1], "user_id": [2]} (a JSON object with a repeated key) is rejected, or at
    least answered with a consistent table: never more statuses than entity values."""
    status, _, raw = kv.raw_post(
        feat.http_port, "/get-online-features",
        b'{"features": ["user_profile:age"], "entities": {"user_id": [1], "user_id": [2]}}',
        {"Content-Type": "application/json"}, timeout=10)
    if status == 400:
        assert b"user_id" in raw, raw
        return
    assert status == 200, (status, raw[:300])
    body = json.loads(raw)
    names = body["metadata"]["feature_names"]
    assert len(names) == len(set(names)), f"repeated columns {names}"
    kv.feast_columns(body)


def test_push_project_must_be_a_string(feat, kv):
    """As on /get-online-features: a non-string "project" is an error, not ignored (ignoring it
    writes into whichever domain declares the group)."""
    r = feat.post("/push", timeout=10, json={"push_source_name": "user_profile", "project": 5,
                                             "df": PUSH_DF})
    assert_error(r, 400, ["project"], kv)


def test_enriched_inference_bad_ids(feat, kv):
    r = feat.infer("shop_mlp", [], parameters={"entity_ids": [1, "abc"]})
    assert_error(r, 400, ["abc"], kv)
    r = feat.infer("shop_mlp", [], parameters={"entity_ids": list(range(65))})
    assert_error(r, 400, ["max_batch_size"], kv)
    r = feat.infer("shop_mlp", [])
    assert_error(r, 400, ["entity_ids", "USER_ID"], kv)
    r = feat.infer("shop_mlp", [kv.tensor_json("USER_ID", np.zeros((2, 2), np.int64), "INT64")])
    assert_error(r, 400, ["USER_ID"], kv)
    r = feat.infer("shop_mlp", [kv.tensor_json("USER_ID", np.zeros(2, np.float32), "FP32")])
    assert_error(r, 400, ["USER_ID"], kv)


# --------------------------------------------------------------------------------------------
# Feature-enriched inference.


@pytest.fixture(scope="module")
def enrich_data(feat, kv):
    """Pushes 2001 and 2002 (fresh) and 2003 (stale); 2004 is never pushed. Returns
    (ids, expected INPUT__0 rows, expected statuses)."""
    now = int(time.time())
    c1, c2, c3 = clicks_of(21), clicks_of(22), clicks_of(23)
    kv.push(feat, "user_profile", {"user_id": [2001, 2002, 2003],
                                   "event_timestamp": [now - 5, now - 30, now - 3 * 3600],
                                   "age": [25, 61.5, 40], "clicks": [c1, c2, c3]})
    ids = [2001, 2002, 2003, 2004, 2001]
    x = np.stack([vector(25, c1), vector(61.5, c2), DEFAULT_VECTOR, DEFAULT_VECTOR,
                  vector(25, c1)])
    return ids, x, "PRESENT,PRESENT,STALE,NOT_FOUND,PRESENT"


def test_enriched_inference_entity_input(feat, kv, refs, model_file, enrich_data):
    ids, x, statuses = enrich_data
    expected = refs.torch(model_file, x)
    for dtype, shape in (("INT64", (len(ids),)), ("INT64", (len(ids), 1)), ("INT32", (len(ids),))):
        arr = np.asarray(ids, np.int64 if dtype == "INT64" else np.int32).reshape(shape)
        r = feat.infer("shop_mlp", [kv.tensor_json("USER_ID", arr, dtype)])
        out = kv.json_outputs(r)
        body = r.json()
        assert body["parameters"]["feature_status"] == statuses, body["parameters"]
        assert out["OUTPUT__0"].shape == (len(ids), 4)
        np.testing.assert_allclose(out["OUTPUT__0"], expected, **TOL)


def test_enriched_inference_parameters(feat, kv, refs, model_file, enrich_data):
    ids, x, statuses = enrich_data
    mixed = [ids[0], str(ids[1]), *ids[2:]]  # ids as numbers or strings
    r = feat.infer("shop_mlp", [], parameters={"entity_ids": mixed})
    out = kv.json_outputs(r)
    assert r.json()["parameters"]["feature_status"] == statuses, r.json()
    np.testing.assert_allclose(out["OUTPUT__0"], refs.torch(model_file, x), **TOL)

    # Sending INPUT__0 itself bypasses the feature store.
    xi = np.random.default_rng(5).normal(size=(2, 16)).astype(np.float32)
    r = feat.infer("shop_mlp", {"INPUT__0": xi})
    np.testing.assert_allclose(kv.json_outputs(r)["OUTPUT__0"], refs.torch(model_file, xi), **TOL)
    assert "feature_status" not in (r.json().get("parameters") or {}), r.json()


def test_enriched_inference_binary_and_batched(feat, kv, refs, model_file, enrich_data):
    """USER_ID through the binary tensor extension, and concurrent enriched requests that the
    dynamic batcher may merge: every response carries its own rows and statuses."""
    ids, x, statuses = enrich_data
    body, headers = kv.binary_request({"USER_ID": np.asarray(ids, np.int64)}, datatype="INT64")
    r = feat.post("/v2/models/shop_mlp/infer", data=body, headers=headers)
    header, out = kv.decode_response(r)
    assert header["parameters"]["feature_status"] == statuses, header
    np.testing.assert_allclose(out["OUTPUT__0"], refs.torch(model_file, x), **TOL)

    rows = {i: (x[k], statuses.split(",")[k]) for k, i in enumerate(ids)}
    orders = [[2001, 2004], [2003, 2002, 2001], [2004], [2002, 2002], [2003, 2001, 2004, 2002],
              [2001], [2002, 2003], [2004, 2003]]
    bodies = [json.dumps({"inputs": [kv.tensor_json("USER_ID", np.asarray(o), "INT64")]}).encode()
              for o in orders]
    results = kv.concurrent_posts(feat.http_port, "/v2/models/shop_mlp/infer", bodies)
    for o, res in zip(orders, results):
        assert not isinstance(res, BaseException), res
        status, raw = res
        assert status == 200, raw[:300]
        body = json.loads(raw)
        assert body["parameters"]["feature_status"] == ",".join(rows[i][1] for i in o), (o, body)
        got = np.asarray(body["outputs"][0]["data"], np.float32).reshape(len(o), 4)
        np.testing.assert_allclose(got, refs.torch(model_file, np.stack([rows[i][0] for i in o])),
                                   **TOL)


def test_enriched_inference_string_entity(feat, kv, refs, feat_repo):
    """A string-keyed entity sent as a BYTES input; FP64 and INT32 features converted to the
    model's FP32 input; defaults for an account never pushed."""
    score = np.random.default_rng(9).normal(size=8)
    counts = [3, -1, 0, 7, 100000, 2, 2, 9]
    kv.push(feat, "wallet", {"account": ["alice@example.com"], "event_timestamp": [time.time()],
                             "score": [score.tolist()], "counts": [counts]})
    r = feat.infer("wallet_mlp", [{"name": "ACCOUNT", "shape": [3], "datatype": "BYTES",
                                   "data": ["alice@example.com", "bob", "alice@example.com"]}])
    out = kv.json_outputs(r)
    assert r.json()["parameters"]["feature_status"] == "PRESENT,NOT_FOUND,PRESENT", r.json()
    alice = np.concatenate([score, counts]).astype(np.float32)
    x = np.stack([alice, WALLET_DEFAULT, alice])
    np.testing.assert_allclose(out["OUTPUT__0"],
                               refs.torch(feat_repo[0] / "wallet_mlp" / "1" / "model.pt", x),
                               **TOL)
    cols = kv.feast_columns(kv.get_online(feat, entities={"account": ["alice@example.com", "bob"]},
                                          service="wallet_mlp"))
    assert cols["counts"]["values"] == [counts, None], cols
    np.testing.assert_allclose(cols["score"]["values"][0], score, rtol=1e-12)


def test_enriched_inference_grpc(feat, kv, refs, model_file, enrich_data, feature_stubs):
    if not feat.grpc_port:
        pytest.fail("the server logged grpc=0: the gRPC frontend was not built")
    ids, x, statuses = enrich_data
    expected = refs.torch(model_file, x)
    g = GrpcClient(feature_stubs, feat.grpc_port)
    try:
        req = g.pb.ModelInferRequest(model_name="shop_mlp")
        req.parameters["entity_ids"].string_param = ",".join(str(i) for i in ids)
        resp = g.stub.ModelInfer(req, timeout=10)
        np.testing.assert_allclose(decode_outputs(resp)["OUTPUT__0"], expected, **TOL)
        assert resp.parameters["feature_status"].string_param == statuses, resp.parameters

        resp = g.infer("shop_mlp", {"USER_ID": np.asarray(ids, np.int64)}, datatype="INT64",
                       timeout=10)
        np.testing.assert_allclose(decode_outputs(resp)["OUTPUT__0"], expected, **TOL)
        assert resp.parameters["feature_status"].string_param == statuses

        bad = g.pb.ModelInferRequest(model_name="shop_mlp")
        bad.parameters["entity_ids"].string_param = "1,abc"
        with pytest.raises(grpc.RpcError) as ei:
            g.stub.ModelInfer(bad, timeout=10)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
        assert "abc" in ei.value.details()
    finally:
        g.close()


# --------------------------------------------------------------------------------------------
# Health and metrics.


def test_healthz_and_metrics(feat, kv):
    r = feat.get("/healthz")
    assert r.status_code == 200, r.text
    fs = r.json()["checks"]["feature_store"]
    assert fs["ok"] is True and fs["tier"] == "memory", fs

    now = int(time.time())
    kv.push(feat, "user_profile", {"user_id": [3001], "event_timestamp": [now], "age": [1],
                                   "clicks": [[0] * 15]})
    hits0 = metric(feat, kv, "dais_feature_l1_requests_total", result="hit")
    misses0 = metric(feat, kv, "dais_feature_l1_requests_total", result="miss")
    kv.get_online(feat, FEATURES, {"user_id": [3001]})  # a push drops L1: a miss
    kv.get_online(feat, FEATURES, {"user_id": [3001]})  # now in L1
    assert metric(feat, kv, "dais_feature_l1_requests_total", result="miss") == misses0 + 1
    assert metric(feat, kv, "dais_feature_l1_requests_total", result="hit") == hits0 + 1
    assert metric(feat, kv, "dais_feature_tier_errors_total") == 0


def test_lookup_duration_histogram_buckets(feat, kv):
    """dais_feature_lookup_duration_seconds observes seconds (Prometheus base units) with bounds
    from 1 us: the lookups (well under a millisecond here) must land in finite buckets."""
    for i in range(5):
        kv.get_online(feat, FEATURES, {"user_id": [3100 + i]})
    samples = kv.parse_prometheus(feat.metrics())
    name = "dais_feature_lookup_duration_seconds"
    buckets = [(l, v) for n, l, v in samples if n == name + "_bucket"]
    assert buckets, f"no {name} buckets"
    count = sum(v for n, l, v in samples if n == name + "_count")
    total = sum(v for n, l, v in samples if n == name + "_sum")
    assert count >= 5 and total / count < 1, (count, total)
    finite = {float(l["le"]) for l, v in buckets if l["le"] != "+Inf"}
    assert min(finite) <= 1e-6 and max(finite) >= 0.1, f"bucket bounds {sorted(finite)}"
    below_inf = max(v for l, v in buckets if l["le"] != "+Inf")
    assert below_inf > 0, "every lookup is counted only in the +Inf bucket"


def test_busy_server_metrics_pass_promtool(feat, kv, enrich_data):
    """Every series of a server that has served enriched inferences, failed ones, lookups and
    pushes follows Prometheus's conventions: promtool check metrics finds nothing to say."""
    ids, _, _ = enrich_data
    for _ in range(3):
        assert feat.infer("shop_mlp", [], parameters={"entity_ids": ids}).status_code == 200
    assert feat.infer("shop_mlp", [], parameters={"entity_ids": [1, "abc"]}).status_code == 400
    kv.get_online(feat, FEATURES, {"user_id": [2001, 2004]})
    now = int(time.time())
    kv.push(feat, "user_profile", {"user_id": [3201], "event_timestamp": [now], "age": [3],
                                   "clicks": [[0] * 15]})
    text = feat.metrics()
    for series in ("dais_request_duration_seconds_bucket", "dais_inference_request_success_total",
                   "dais_feature_lookup_duration_seconds_bucket", "dais_model_ready",
                   "dais_feature_l1_requests_total", "dais_listener_connections"):
        assert series in text, series
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
