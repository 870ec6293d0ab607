"""Issue 11 regression tests: untrusted model files that could kill or hang a node, resource
limits under abuse, and input-validation gaps. Each test reproduces a defect found by the
hostile-input run on the code before the fix.

XGBoost cases mutate the generated example model (xgb_binary); the load goes through the
repository API in explicit mode, with and without the child-process check
(--model-load-isolation), so the validation alone is shown to be enough for JSON models.
"""

import json
import resource
import shutil
import socket
import time

import numpy as np
import pytest

XGB = "xgb_binary"


def xgb_trees(model: dict) -> list:
    return model["learner"]["gradient_booster"]["model"]["trees"]


def write_xgb_variant(repo, src_repo, name: str, mutate) -> None:
    """A copy of xgb_binary named `name` whose xgboost.json went through mutate(model)."""
    d = repo / name
    shutil.copytree(src_repo / XGB, d)
    cfg = d / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace(f'name: "{XGB}"', f'name: "{name}"'))
    path = d / "1" / "xgboost.json"
    model = json.loads(path.read_text())
    mutate(model)
    path.write_text(json.dumps(model))


def deep_internal_node(tree: dict) -> tuple[int, int]:
    """(node, its parent) for an internal node at depth >= 2, walking from the root."""
    left, right = tree["left_children"], tree["right_children"]
    frontier = [(0, -1, 0)]
    while frontier:
        node, parent, depth = frontier.pop(0)
        if left[node] == -1:
            continue
        if depth >= 2:
            return node, parent
        frontier += [(left[node], node, depth + 1), (right[node], node, depth + 1)]
    raise AssertionError("no internal node at depth 2 in the tree")


def every_tree(fn):
    def mutate(model):
        for t in xgb_trees(model):
            fn(t)
    return mutate


def root_out_of_range(t):
    t["left_children"][0] = 1000000000


def root_cycle(t):
    t["left_children"][0] = 0


def deep_cycle(model):
    t = xgb_trees(model)[0]
    node, parent = deep_internal_node(t)
    t["left_children"][node] = parent  # back to an ancestor: an endless walk at inference


def deep_out_of_range(model):
    t = xgb_trees(model)[0]
    node, _ = deep_internal_node(t)
    t["right_children"][node] = len(t["left_children"]) + 5  # read outside the model


BAD_XGB = {
    # (mutation, words the error must contain)
    "xgb_root_out_of_range": (every_tree(root_out_of_range),
                              ["left_children[0] = 1000000000", "out of range"]),
    "xgb_root_cycle": (every_tree(root_cycle), ["tree 0", "left_children[0] = 0"]),
    "xgb_deep_cycle": (deep_cycle, ["tree 0", "left_children["]),
    "xgb_deep_out_of_range": (deep_out_of_range, ["tree 0", "right_children[", "out of range"]),
}


@pytest.fixture
def bad_xgb_repo(model_repo, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(model_repo / XGB, repo / XGB)
    for name, (mutate, _) in BAD_XGB.items():
        write_xgb_variant(repo, model_repo, name, mutate)
    return repo


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_malformed_xgboost_json_is_refused_not_a_crash_or_hang(bad_xgb_repo, start_server, kv,
                                                              isolation):
    """Defects 1 and 2: out-of-range children segfaulted the server at load; a cycle at the root
    hung the load (and then shutdown); the same faults deeper in a tree loaded and then hung the
    first inference or answered from memory outside the model."""
    srv = start_server(bad_xgb_repo, "--model-control-mode", "explicit", "--load-model", XGB,
                       "--model-load-isolation", isolation, "--model-load-timeout-secs", "60")
    for name, (_, words) in BAD_XGB.items():
        t0 = time.monotonic()
        r = srv.post(f"/v2/repository/models/{name}/load", timeout=60)
        took = time.monotonic() - t0
        assert r.status_code == 400, f"{name}: {r.status_code} {r.text[:300]}"
        text = kv.error_text(r)
        missing = [w for w in words if w not in text]
        assert not missing, f"{name}: error {text!r} does not mention {missing}"
        assert took < 30, f"{name}: refusing took {took:.1f}s"
        assert srv.running(), f"the server died loading {name}"
        entry = srv.index_entry(name)
        assert entry["state"] == "UNAVAILABLE" and entry["reason"], entry
    assert srv.get("/v2/health/live").status_code == 200
    x = np.random.default_rng(3).normal(size=(2, 8)).astype(np.float32)
    kv.json_outputs(srv.infer(XGB, {"input__0": x}))
    assert srv.stop(timeout=15) == 0


def write_ubj_with_bad_children(model_repo, repo, name: str) -> None:
    """xgb_binary saved as UBJSON (model_type xgboost_ubj) with every tree's left_children[0]
    set to 1000000000, patched in the binary: no JSON validation can see it before the load."""
    import xgboost
    d = repo / name
    (d / "1").mkdir(parents=True)
    booster = xgboost.Booster(model_file=str(model_repo / XGB / "1" / "xgboost.json"))
    raw = bytearray(booster.save_raw(raw_format="ubj"))
    key = b"left_children"
    count = 0
    at = raw.find(key)
    while at >= 0:
        # An optimized typed array follows: '[' '$' <type> '#' <count type> <count> values...
        p = at + len(key)
        assert raw[p:p + 2] == b"[$", raw[p:p + 8]
        vtype, ctype = bytes(raw[p + 2:p + 3]), bytes(raw[p + 4:p + 5])
        size = {b"i": 1, b"U": 1, b"I": 2, b"l": 4, b"L": 8}[ctype]
        first = p + 5 + size
        assert vtype == b"l", vtype  # int32, big-endian
        raw[first:first + 4] = (1000000000).to_bytes(4, "big")
        count += 1
        at = raw.find(key, first)
    assert count > 0
    (d / "1" / "xgboost.ubj").write_bytes(bytes(raw))
    cfg = (model_repo / XGB / "config.pbtxt").read_text().replace(f'name: "{XGB}"',
                                                                  f'name: "{name}"')
    (d / "config.pbtxt").write_text(cfg.replace('"xgboost_json"', '"xgboost_ubj"'))


def test_ubj_with_bad_children_is_refused_before_any_prediction(model_repo, tmp_path,
                                                               start_server, kv):
    """UBJSON cannot be checked before libxgboost reads it: its trees are checked right after
    the load, from the library's own JSON dump, before any prediction walks them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(model_repo / XGB, repo / XGB)
    write_ubj_with_bad_children(model_repo, repo, "xgb_ubj_bad")
    srv = start_server(repo, "--model-control-mode", "explicit", "--load-model", XGB,
                       "--model-load-isolation", "none")
    r = srv.post("/v2/repository/models/xgb_ubj_bad/load", timeout=60)
    assert r.status_code == 400, f"{r.status_code} {r.text[:300]}"
    text = kv.error_text(r)
    assert "left_children[0] = 1000000000 is out of range" in text, text
    assert srv.running()


def test_model_that_crashes_its_process_only_kills_the_check_process(tmp_path, start_server,
                                                                    kv):
    """With --model-load-isolation (the default in explicit mode) a version is loaded first in a
    child process: a load that kills its process (the identity test backend raising SIGSEGV,
    standing in for a library crash) kills the child, and the server answers 400 naming the
    signal and keeps serving. Without isolation the same load kills the server."""
    repo = tmp_path / "repo"
    kv.write_identity_model(repo, "fine", creation_delay_sec=0)
    d = kv.write_identity_model(repo, "crasher", creation_delay_sec=0)
    cfg = d / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace(
        "parameters [", 'parameters [\n  { key: "creation_signal" value: { string_value: "11" } },'))
    srv = start_server(repo, "--model-control-mode", "explicit", "--load-model", "fine")
    r = srv.post("/v2/repository/models/crasher/load", timeout=60)
    assert r.status_code == 400, f"{r.status_code} {r.text[:300]}"
    text = kv.error_text(r)
    assert "killed the check process with signal 11" in text, text
    assert srv.running()
    assert srv.post("/v2/models/fine/infer", json=kv.IDENTITY_BODY).status_code == 200
    entry = srv.index_entry("crasher")
    assert entry["state"] == "UNAVAILABLE" and "signal 11" in entry["reason"], entry

    unprotected = start_server(repo, "--model-control-mode", "explicit", "--load-model", "fine",
                               "--model-load-isolation", "none")
    try:
        unprotected.post("/v2/repository/models/crasher/load", timeout=30)
    except Exception:  # the connection dies with the process
        pass
    assert unprotected.wait(timeout=10) == -11


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_load_timeout_and_bounded_shutdown(tmp_path, start_server, kv, isolation):
    """Defect 2's other half: a load that never returns left the model LOADING forever and
    SIGTERM no longer ended the process. Now the load fails at --model-load-timeout-secs and
    shutdown is bounded by --exit-timeout-secs (plus a short grace) even with the thread stuck."""
    repo = tmp_path / "repo"
    kv.write_identity_model(repo, "stuck", creation_delay_sec=3600)
    kv.write_identity_model(repo, "fine", creation_delay_sec=0)
    srv = start_server(repo, "--model-control-mode", "explicit", "--load-model", "fine",
                       "--model-load-timeout-secs", "2", "--exit-timeout-secs", "2",
                       "--model-load-isolation", isolation)
    t0 = time.monotonic()
    r = srv.post("/v2/repository/models/stuck/load", timeout=30)
    took = time.monotonic() - t0
    assert r.status_code == 503, f"{r.status_code} {r.text[:300]}"
    assert "did not finish within 2 s" in kv.error_text(r)
    assert 1.5 < took < 10, took
    entry = srv.index_entry("stuck")
    assert entry["state"] == "UNAVAILABLE" and "--model-load-timeout-secs" in entry["reason"]
    assert srv.post("/v2/models/fine/infer", json=kv.IDENTITY_BODY).status_code == 200
    srv.signal()
    t0 = time.monotonic()
    srv.wait(timeout=20)
    assert time.monotonic() - t0 < 2 + 3 + 2, "shutdown not bounded by --exit-timeout-secs"


def test_output_shape_must_match_the_config(model_repo, tmp_path, start_server, kv):
    """The warm-up compares what the model produces with config.pbtxt: [4] where the config
    says [7] is refused at load, naming both shapes."""
    repo = tmp_path / "repo"
    src = model_repo / "mlp_small"
    shutil.copytree(src, repo / "mlp_wrong")
    cfg = (repo / "mlp_wrong" / "config.pbtxt").read_text().replace('name: "mlp_small"',
                                                                     'name: "mlp_wrong"')
    head, sep, out = cfg.partition("output")
    dims_at = out.index("dims:")
    open_at, close_at = out.index("[", dims_at), out.index("]", dims_at)
    real = int(out[open_at + 1:close_at].strip())
    out = out[:open_at + 1] + f" {real + 3} " + out[close_at:]
    (repo / "mlp_wrong" / "config.pbtxt").write_text(head + sep + out)
    srv = start_server(repo, "--model-control-mode", "explicit", "--model-load-isolation", "none")
    r = srv.post("/v2/repository/models/mlp_wrong/load", timeout=60)
    assert r.status_code == 400, r.text
    text = kv.error_text(r)
    assert f"[1,{real}]" in text and f"[1,{real + 3}]" in text, text
    assert "OUTPUT__0" in text, text


# -- JSON nesting -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/v2/repository/index", f"/v2/repository/models/{XGB}/load",
                                  "/v2/models/mlp_small/infer"])
def test_deep_json_is_refused_quickly(start_server, repo_copy, kv, path):
    """Defects 4 and 5: ~250,000 levels crashed the repository endpoints (stack overflow); a
    40 MB body of brackets took 11.7 s and 0.9 GB before its 400."""
    srv = start_server(repo_copy, "--model-control-mode", "explicit", "--load-model", "mlp_small",
                       "--load-model", XGB)
    for body in (b"[" * 250_000, b'{"a":' * 250_000, b"[" * (40 << 20)):
        t0 = time.monotonic()
        status, _, text = kv.raw_post(srv.http_port, path, body,
                                      {"Content-Type": "application/json"}, timeout=30)
        took = time.monotonic() - t0
        assert status == 400, (status, text[:200])
        assert b"nested deeper than 100 levels" in text, text[:300]
        assert took < 5, f"{len(body)} bytes took {took:.2f}s"
    assert srv.get("/v2/health/live").status_code == 200
    # 100 levels are fine where the endpoint takes arbitrary JSON.
    ok = b'{"x":' + b"[" * 98 + b"]" * 98 + b"}"
    status, _, text = kv.raw_post(srv.http_port, "/v2/repository/index", ok, timeout=30)
    assert status == 200, text[:300]


def test_index_ready_must_be_a_boolean(server, kv):
    r = server.post("/v2/repository/index", data='{"ready": "yes"}')
    assert r.status_code == 400
    assert "expected a boolean" in kv.error_text(r)


def test_ragged_nested_data_is_refused(server, kv):
    body = {"inputs": [{"name": "input__0", "shape": [1, 8], "datatype": "FP32",
                        "data": [[[1]], 2, [3, [4]], 5, 6, 7, 8]}]}
    r = server.post(f"/v2/models/{XGB}/infer", json=body)
    assert r.status_code == 400, r.text
    assert "ragged" in kv.error_text(r)


# -- HTTP/1.1 details -----------------------------------------------------------------------------

def raw_http(port: int, request: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body


def test_http11_without_host_is_400(server):
    reply = raw_http(server.http_port, b"GET /v2/health/live HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"Host" in reply
    reply = raw_http(server.http_port, b"GET /v2/health/live HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200") or reply.startswith(b"HTTP/1.0 200"), reply[:200]


def test_error_bodies_are_valid_utf8(server):
    reply = raw_http(server.http_port,
                     b"GET /v2/models/\xff\xfe\xc3/config HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404"), head
    text = body.decode("utf-8")  # strict: raises on invalid UTF-8
    assert "\\xff\\xfe\\xc3" in json.loads(text)["error"], text


def test_llhttp_framing_edge_cases(server, kv):
    """The request reader's edges found in review (llhttp on the serving path): an empty
    Transfer-Encoding is not framed by the Content-Length beside it (a smuggling vector); CONNECT
    is refused (llhttp ends it at its head); whitespace after a header value is not part of it;
    a raw UTF-8 path after an empty line is still read."""
    smuggled = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    reply = raw_http(server.http_port,
                     b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n"
                     b"Content-Length: 2\r\n\r\n{}" + smuggled)
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert b"Transfer-Encoding" in reply
    reply = raw_http(server.http_port, b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 501 "), reply[:200]
    # A binary inference request whose JSON length has whitespace after it (Beast trimmed it;
    # llhttp keeps it: with it, the length would not parse and the answer would be a 400).
    x = np.random.default_rng(3).normal(size=(1, 16)).astype(np.float32)
    body, headers = kv.binary_request({"INPUT__0": x})
    head = (f"POST /v2/models/mlp_small/infer HTTP/1.1\r\nHost: x\r\n"
            f"Inference-Header-Content-Length: {headers['Inference-Header-Content-Length']} \t\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n")
    reply = raw_http(server.http_port, head.encode() + body)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    reply = raw_http(server.http_port,
                     b"\r\nGET /v2/models/\xc3\xa9/config HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 404 "), reply[:200]


def test_the_lingering_close_after_an_early_answer_is_bounded_in_all(server):
    """After an answer given before the request was read (here a CONNECT, refused at its head),
    the server reads and drops what follows for a few seconds in all (nginx's lingering_time),
    not a few seconds after each read: a client that keeps sending is cut off."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
        s.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        assert got.startswith(b"HTTP/1.1 501 "), got[:200]
        # The server has shut its sending side (the answer is complete) but still reads; once it
        # closes for good, a send is answered by a reset and the next one fails.
        deadline = time.monotonic() + 20
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                s.sendall(b"x" * 100)
            except OSError:
                closed = True
                break
            time.sleep(0.5)  # the client's pace (the behaviour under test), not a wait
        assert closed, "the connection was still open 20 s after the answer"


# -- connection limits ----------------------------------------------------------------------------

def metric_value(text: str, name: str, labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}}} "):
            return float(line.split()[-1])
    return 0.0


def proc_cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / __import__("os").sysconf("SC_CLK_TCK")


def test_idle_connections_over_the_limit_do_not_starve_liveness(start_server, repo_copy):
    """Defect 3: ~20,500 idle connections exhausted the open-file limit, the I/O threads spun on
    accept and /v2/health/live timed out. With --http-max-connections the longest-idle
    connection makes room for a new one, so a prober still gets through."""
    srv = start_server(repo_copy, "--model-control-mode", "explicit", "--http-max-connections",
                       "50")
    held = []
    try:
        for _ in range(150):
            held.append(socket.create_connection(("127.0.0.1", srv.http_port), timeout=5))
        for _ in range(5):
            t0 = time.monotonic()
            assert srv.get("/v2/health/live", timeout=5).status_code == 200
            assert time.monotonic() - t0 < 2
        m = srv.metrics()
        assert metric_value(m, "dais_listener_connections_max", 'listener="http"') == 50
        assert metric_value(m, "dais_listener_connections_evicted_total",
                            'listener="http"') >= 100
        assert metric_value(m, "dais_listener_connections", 'listener="http"') <= 51
    finally:
        for s in held:
            s.close()


def test_a_client_that_never_reads_its_answers_is_closed(start_server, repo_copy):
    """A client that sent requests and never read the answers held its connection, and the answer
    the server had buffered, for ever: the connection's timeout was cleared once a request was
    complete. An answer that waits for the client now waits at most the idle timeout (plus its
    rest at the minimum rate, switched off here)."""
    srv = start_server(repo_copy, "--model-control-mode", "explicit",
                       "--http-idle-timeout-secs", "2", "--min-request-bytes-per-sec", "0")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.http_port))
    s.setblocking(False)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"  # tens of KiB each, never read
    reset = False
    deadline = time.monotonic() + 30
    try:
        while not reset and time.monotonic() < deadline:
            try:
                s.send(request)
            except BlockingIOError:  # both sides' buffers are full: wait for the server to act
                time.sleep(0.05)
            except (ConnectionResetError, BrokenPipeError):
                reset = True
        assert reset, "the server still holds a connection whose client reads nothing"
        assert srv.get("/v2/health/live", timeout=5).status_code == 200
    finally:
        s.close()


def test_a_flood_of_silent_connections_does_not_close_an_active_client(start_server, repo_copy):
    """Issue 31: a client sending a request every 100 ms on one keep-alive connection was closed
    after 4 answers once 600 connections that never send a byte arrived. Silent connections are
    now closed before one that has served requests; the client's connection survives them all."""
    srv = start_server(repo_copy, "--model-control-mode", "explicit", "--http-max-connections",
                       "50")
    import http.client
    client = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=5)
    held, answers = [], 0
    try:
        client.request("GET", "/v2/health/live")
        first = client.getresponse()
        first.read()
        assert first.status == 200
        mine = client.sock.getsockname()
        for _ in range(6):
            for _ in range(100):
                held.append(socket.create_connection(("127.0.0.1", srv.http_port), timeout=5))
            # On a connection the server closed this raises (http.client does not reconnect
            # while it holds a socket).
            client.request("GET", "/v2/health/live")
            r = client.getresponse()
            r.read()
            assert r.status == 200
            answers += 1
            assert client.sock is not None and client.sock.getsockname() == mine, \
                f"a new connection after {answers} answers"
            time.sleep(0.1)
        m = srv.metrics()
        assert metric_value(m, "dais_listener_connections_evicted_total",
                            'listener="http"') >= 500
    finally:
        client.close()
        for s in held:
            s.close()


def test_out_of_descriptors_backs_off_instead_of_spinning(start_server, repo_copy):
    """The same attack with the limit above what the process may open: accept fails with EMFILE.
    The listener must back off (no busy loop) and free an idle connection for new clients."""
    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    import subprocess
    real_popen = subprocess.Popen

    class LowLimitPopen(real_popen):
        def __init__(self, *a, **kw):
            kw["preexec_fn"] = low_nofile
            super().__init__(*a, **kw)

    subprocess.Popen = LowLimitPopen
    try:
        srv = start_server(repo_copy, "--model-control-mode", "explicit",
                           "--http-max-connections", "100000", "--allow-grpc", "false")
    finally:
        subprocess.Popen = real_popen
    held = []
    try:
        for _ in range(400):
            try:
                held.append(socket.create_connection(("127.0.0.1", srv.http_port), timeout=5))
            except OSError:
                break
        time.sleep(0.5)  # let the server reach EMFILE on the queued connections
        cpu0 = proc_cpu_seconds(srv.pid)
        time.sleep(2.0)
        cpu = proc_cpu_seconds(srv.pid) - cpu0
        assert cpu < 0.5, f"the server used {cpu:.2f}s of CPU in 2s at the descriptor limit"
        assert srv.get("/v2/health/live", timeout=10).status_code == 200
        m = srv.metrics()
        assert metric_value(m, "dais_listener_accept_errors_total",
                            'listener="http",error="emfile"') > 0, m[-2000:]
    finally:
        for s in held:
            s.close()
    assert srv.get("/v2/health/live", timeout=10).status_code == 200


def test_grpc_idle_connections_over_the_limit_are_evicted(start_server, repo_copy, tmp_path):
    """The gRPC listener applies the same policy: a connection without open calls is idle."""
    import grpc_client
    stubs = grpc_client.generate_stubs(tmp_path / "stubs")
    srv = start_server(repo_copy, "--model-control-mode", "explicit", "--grpc-max-connections",
                       "3")
    held = [socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=5) for _ in range(10)]
    try:
        client = grpc_client.GrpcClient(stubs, srv.grpc_port)
        assert client.stub.ServerLive(stubs.pb.ServerLiveRequest(), timeout=10).live
        client.close()
        m = srv.metrics()
        assert metric_value(m, "dais_listener_connections_max", 'listener="grpc"') == 3
        assert metric_value(m, "dais_listener_connections_evicted_total",
                            'listener="grpc"') >= 7, m
    finally:
        for s in held:
            s.close()


def test_metrics_pass_promtool(start_server, repo_copy, tmp_path):
    """The new listener series follow Prometheus's conventions (promtool check metrics)."""
    import shutil as sh
    import subprocess
    promtool = sh.which("promtool") or "/usr/bin/promtool"
    srv = start_server(repo_copy, "--model-control-mode", "explicit")
    socket.create_connection(("127.0.0.1", srv.http_port), timeout=5).close()
    text = srv.metrics()
    assert "dais_listener_connections_evicted_total" in text
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def children_of(pid: int) -> list[int]:
    out = []
    import os
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(d))
    return out


def test_load_check_zygote_is_restarted_when_it_dies(repo_copy, start_server, kv):
    """Checks run in forks of one zygote process started at the first check; when it dies the
    next check starts another (and a check it was running fails over to a process of its own)."""
    import os
    import signal as sig
    srv = start_server(repo_copy, "--model-control-mode", "explicit")
    assert srv.post("/v2/repository/models/xgb_binary/load", timeout=60).status_code == 200
    zygotes = [c for c in children_of(srv.pid)
               if b"--zygote" in open(f"/proc/{c}/cmdline", "rb").read()]
    assert len(zygotes) == 1, zygotes
    os.kill(zygotes[0], sig.SIGKILL)
    # The check right after may still reach the dead zygote's pipe: it fails over to a process
    # of its own; the one after starts a new zygote.
    for model in ("mlp_small", "mlp_heavy"):
        assert srv.post(f"/v2/repository/models/{model}/load", timeout=60).status_code == 200
    again = [c for c in children_of(srv.pid)
             if b"--zygote" in open(f"/proc/{c}/cmdline", "rb").read()]
    assert len(again) == 1 and again != zygotes, (zygotes, again)
    x = np.random.default_rng(5).normal(size=(1, 16)).astype(np.float32)
    kv.json_outputs(srv.infer("mlp_small", {"INPUT__0": x}))
    assert srv.stop(timeout=15) == 0


@pytest.mark.parametrize("te,status", [("chunked, identity", 400), ("identity", 400),
                                       ("gzip, chunked", 501)])
def test_a_transfer_encoding_not_ending_in_chunked_is_refused(server, te, status):
    """Issue 32: `Transfer-Encoding: chunked, identity` was accepted and its body parsed as a
    second request (one request, two answers). RFC 9112 §6.3: 400 and close."""
    smuggled = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    head = (f"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {te}\r\n"
            f"Content-Type: application/json\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=5) as s:
        s.sendall(head + b"2\r\n{}\r\n0\r\n\r\n" + smuggled)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    assert got.startswith(f"HTTP/1.1 {status} ".encode()), got[:200]
    assert got.count(b"HTTP/1.1 ") == 1, got  # one answer, then the connection closed
    assert b"Transfer-Encoding" in got
