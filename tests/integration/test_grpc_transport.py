"""dais's own gRPC transport (src/frontends/grpc/h2_*) seen from raw HTTP/2 with python3-h2:
what grpcio does not exercise on purpose. Flow control both ways on a message far larger than
the peer's windows, a call refused while the client is still sending, HTTP/1.1 and non-gRPC
requests on the gRPC port, many calls multiplexed on one connection, keepalive PINGs closing a
connection that never answers them, and GOAWAY on SIGTERM after the open call is answered."""
import socket
import struct
import time

import numpy as np
import pytest
import requests

import h2.config
import h2.connection
import h2.events

from test_grpc import require_grpc, stubs  # noqa: F401 (fixture)

LIVE = "/inference.GRPCInferenceService/ServerLive"
INFER = "/inference.GRPCInferenceService/ModelInfer"

BIG = 262144  # INT32 elements: 1 MiB each way
BIG_CONFIG = f"""\
name: "big"
backend: "identity"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ {BIG} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ {BIG} ] }} ]
"""


def frame(message: bytes) -> bytes:
    return b"\0" + struct.pack(">I", len(message)) + message


def messages(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        assert data[pos] == 0, "compressed flag set"
        (n,) = struct.unpack(">I", data[pos + 1:pos + 5])
        out.append(data[pos + 5:pos + 5 + n])
        pos += 5 + n
    assert pos == len(data)
    return out


class Call:
    def __init__(self):
        self.headers, self.trailers, self.data = {}, {}, b""
        self.ended = False
        self.reset = None

    @property
    def grpc_status(self):
        src = self.trailers or self.headers
        return int(src["grpc-status"]) if "grpc-status" in src else None


class RawH2:
    """A minimal HTTP/2 client: calls are opened, then pump() moves bytes until a condition."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.calls: dict[int, Call] = {}
        self.goaway = False
        self.closed = False
        self.settings = False
        self.flush()

    def handshake(self):
        self.pump(lambda: self.settings)
        return self

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def open(self, path, body: bytes, end=True, content_type="application/grpc",
             extra=()) -> int:
        sid = self.conn.get_next_available_stream_id()
        self.calls[sid] = Call()
        self.conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path),
                                     (":authority", "dais"), ("content-type", content_type),
                                     ("te", "trailers"), *extra])
        self.flush()
        self.send(sid, body, end)
        return sid

    def send(self, sid, body: bytes, end: bool):
        """Sends `body` within the flow-control windows the server grants."""
        pos = 0
        while pos < len(body):
            n = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size,
                    len(body) - pos)
            if n <= 0:
                self.pump(lambda: self.conn.local_flow_control_window(sid) > 0 or
                          self.calls[sid].ended)
                if self.calls[sid].ended:
                    return
                continue
            self.conn.send_data(sid, body[pos:pos + n], end_stream=end and pos + n == len(body))
            pos += n
            self.flush()
        if end and not body:
            self.conn.end_stream(sid)
            self.flush()

    def pump(self, until, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not until():
            if self.closed:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no progress from the server")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 20)
            if not data:
                self.closed = True
                return
            for ev in self.conn.receive_data(data):
                self.on_event(ev)
            self.flush()

    def on_event(self, ev):
        c = self.calls.get(getattr(ev, "stream_id", None) or 0)
        if isinstance(ev, h2.events.ResponseReceived):
            c.headers = dict(ev.headers)
        elif isinstance(ev, h2.events.TrailersReceived):
            c.trailers = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            c.data += ev.data
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            c.ended = True
        elif isinstance(ev, h2.events.StreamReset):
            c.reset = ev.error_code
            c.ended = True
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = True
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings = True

    def call(self, path, body: bytes, **kw) -> Call:
        sid = self.open(path, body, **kw)
        self.pump(lambda: self.calls[sid].ended)
        return self.calls[sid]

    def close(self):
        self.sock.close()


@pytest.fixture
def big_server(model_repo, tmp_path, start_server):
    repo = tmp_path / "repo"
    (repo / "big" / "1").mkdir(parents=True)
    (repo / "big" / "config.pbtxt").write_text(BIG_CONFIG)
    srv = start_server(repo, "--grpc-max-message-bytes", str(8 << 20))
    require_grpc(srv)
    return srv


def test_flow_control_both_ways_on_a_1mib_message(big_server, stubs):
    """1 MiB in, 1 MiB out: the client's 64 KiB stream window makes the server wait for
    WINDOW_UPDATEs while it writes; the answer arrives whole and equal to the input."""
    pb = stubs.pb
    x = np.arange(BIG, dtype=np.int32)
    req = pb.ModelInferRequest(model_name="big")
    t = req.inputs.add(name="INPUT0", datatype="INT32", shape=[BIG])
    req.raw_input_contents.append(x.tobytes())
    c = RawH2(big_server.grpc_port).handshake()
    try:
        assert c.conn.remote_settings.initial_window_size >= 1 << 20  # dais grants large windows
        call = c.call(INFER, frame(req.SerializeToString()))
        assert call.headers.get(":status") == "200", call.headers
        assert call.grpc_status == 0, (call.headers, call.trailers)
        (msg,) = messages(call.data)
        resp = pb.ModelInferResponse.FromString(msg)
        out = np.frombuffer(resp.raw_output_contents[0], dtype=np.int32)
        assert resp.outputs[0].name == "OUTPUT0" and list(resp.outputs[0].shape) == [BIG]
        np.testing.assert_array_equal(out, x)
    finally:
        c.close()


def test_gzip_messages_in_and_out(big_server, stubs):
    """grpc-encoding gzip (what tritonclient's compression_algorithm and grpcio's compression=
    send): a compressed 1 MiB request is accepted, and as the client accepts gzip back the
    answer comes compressed (flag 1, grpc-encoding: gzip) and decompresses to the input. An
    unknown encoding is UNIMPLEMENTED naming what is accepted; grpcio with gzip just works."""
    import gzip

    import grpc

    from grpc_client import GrpcClient

    pb = stubs.pb
    x = (np.arange(BIG, dtype=np.int32) % 7).astype(np.int32)
    req = pb.ModelInferRequest(model_name="big")
    req.inputs.add(name="INPUT0", datatype="INT32", shape=[BIG])
    req.raw_input_contents.append(x.tobytes())
    packed = gzip.compress(req.SerializeToString())
    assert len(packed) < (1 << 20) // 10
    c = RawH2(big_server.grpc_port).handshake()
    try:
        call = c.call(INFER, b"\1" + struct.pack(">I", len(packed)) + packed,
                      extra=[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "identity,gzip")])
        assert call.grpc_status == 0, (call.headers, call.trailers)
        assert call.headers.get("grpc-encoding") == "gzip", call.headers
        assert "gzip" in call.headers.get("grpc-accept-encoding", ""), call.headers
        assert call.data[0] == 1, "the answer is not compressed"
        (n,) = struct.unpack(">I", call.data[1:5])
        assert n == len(call.data) - 5 and n < (1 << 20) // 10
        resp = pb.ModelInferResponse.FromString(gzip.decompress(call.data[5:]))
        np.testing.assert_array_equal(np.frombuffer(resp.raw_output_contents[0], np.int32), x)

        call = c.call(INFER, b"\1" + struct.pack(">I", len(packed)) + packed,
                      extra=[("grpc-encoding", "br")])
        assert call.grpc_status == 12, (call.headers, call.trailers)
        assert "identity,deflate,gzip" in (call.trailers or call.headers).get("grpc-message", "")
    finally:
        c.close()
    g = GrpcClient(stubs, big_server.grpc_port, compression=grpc.Compression.Gzip)
    try:
        out = g.stub.ModelInfer(req, timeout=30)
        np.testing.assert_array_equal(np.frombuffer(out.raw_output_contents[0], np.int32), x)
    finally:
        g.close()


def test_refused_while_sending_then_connection_still_serves(big_server, stubs):
    """A message over --grpc-max-message-bytes is refused from its length prefix, before its
    bytes arrive: RESOURCE_EXHAUSTED in a Trailers-Only answer, then RST_STREAM(NO_ERROR); the
    connection goes on serving."""
    c = RawH2(big_server.grpc_port)
    try:
        big = 16 << 20
        sid = c.open(INFER, b"\0" + struct.pack(">I", big) + b"x" * 1000, end=False)
        c.pump(lambda: c.calls[sid].ended)
        call = c.calls[sid]
        assert call.grpc_status == 8, (call.headers, call.trailers)
        assert "larger than max" in call.headers.get("grpc-message", ""), call.headers
        assert call.data == b""
        live = c.call(LIVE, frame(stubs.pb.ServerLiveRequest().SerializeToString()))
        assert live.grpc_status == 0
        assert stubs.pb.ServerLiveResponse.FromString(messages(live.data)[0]).live
    finally:
        c.close()


def metric(server, series: str) -> float:
    """The value of one series on the server's /metrics (0 when absent)."""
    body = requests.get(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).text
    for line in body.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def test_many_calls_multiplexed_on_one_connection(server, stubs):
    require_grpc(server)
    pb = stubs.pb
    c = RawH2(server.grpc_port)
    try:
        rng = np.random.default_rng(3)
        xs = [rng.random((1, 16), dtype=np.float32) for _ in range(100)]
        sids = []
        for i, x in enumerate(xs):
            req = pb.ModelInferRequest(model_name="mlp_small", id=str(i))
            req.inputs.add(name="INPUT__0", datatype="FP32", shape=[1, 16])
            req.raw_input_contents.append(x.tobytes())
            sids.append(c.open(INFER, frame(req.SerializeToString())))
        assert metric(server, "dais_grpc_connections") >= 1
        c.pump(lambda: all(c.calls[s].ended for s in sids))
        for i, s in enumerate(sids):
            call = c.calls[s]
            assert call.grpc_status == 0, (call.headers, call.trailers)
            resp = pb.ModelInferResponse.FromString(messages(call.data)[0])
            assert resp.id == str(i)
    finally:
        c.close()


def test_not_grpc_requests_on_the_grpc_port(server):
    require_grpc(server)
    # HTTP/1.1 on the gRPC port: a plain answer that says where to go.
    with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400"), data
    assert b"gRPC" in data and b"HTTP port" in data, data
    assert metric(server, 'dais_grpc_connections_closed_total{reason="not_http2"}') >= 1
    # HTTP/2 but not gRPC: 415, as the gRPC specification says.
    c = RawH2(server.grpc_port)
    try:
        call = c.call(LIVE, b"{}", content_type="application/json")
        assert call.headers.get(":status") == "415", call.headers
        # An unknown method names itself.
        call = c.call("/no.Such/Method", frame(b""))
        assert call.grpc_status == 12
        assert "/no.Such/Method" in call.headers.get("grpc-message", "")
    finally:
        c.close()


def test_keepalive_closes_a_connection_that_does_not_answer_pings(model_repo, start_server,
                                                                   stubs):
    srv = start_server(model_repo, "--grpc-keepalive-time", "300", "--grpc-keepalive-timeout",
                       "300", "--grpc-keepalive-permit-without-calls", "1")
    require_grpc(srv)
    # A client that answers PINGs (h2 acknowledges them as it reads) keeps its connection.
    alive = RawH2(srv.grpc_port)
    body = frame(stubs.pb.ServerLiveRequest().SerializeToString())
    try:
        assert alive.call(LIVE, body).grpc_status == 0
        until = time.monotonic() + 1.5
        with pytest.raises(TimeoutError):
            alive.pump(lambda: alive.closed, timeout=until - time.monotonic())
        assert not alive.closed
        assert alive.call(LIVE, body).grpc_status == 0
    finally:
        alive.close()
    # A client that sends its preface and then never reads: closed after time + timeout.
    silent = RawH2(srv.grpc_port)
    try:
        time.sleep(1.5)
        silent.sock.settimeout(5)
        data, t0 = b"", time.monotonic()
        while chunk := silent.sock.recv(65536):
            data += chunk
            assert time.monotonic() - t0 < 5, "the silent connection was not closed"
        assert data, "the server sent nothing (no SETTINGS, no PING)"
    finally:
        silent.close()
    assert srv.running()
    assert metric(srv, 'dais_grpc_connections_closed_total{reason="keepalive_timeout"}') >= 1


def test_goaway_on_sigterm_after_the_open_call_is_answered(tmp_path, start_server, stubs):
    """SIGTERM while a call is running: its answer arrives (OK), then GOAWAY, then the
    connection closes and the process exits 0."""
    repo = tmp_path / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "config.pbtxt").write_text(
        BIG_CONFIG.replace('name: "big"', 'name: "slow"').replace(str(BIG), "4") +
        'parameters [ { key: "execute_delay_ms" value: { string_value: "500" } } ]\n')
    srv = start_server(repo)
    require_grpc(srv)
    c = RawH2(srv.grpc_port)
    try:
        req = stubs.pb.ModelInferRequest(model_name="slow")
        req.inputs.add(name="INPUT0", datatype="INT32", shape=[4])
        req.raw_input_contents.append(np.arange(4, dtype=np.int32).tobytes())
        sid = c.open(INFER, frame(req.SerializeToString()))
        time.sleep(0.1)
        srv.proc.send_signal(15)
        c.pump(lambda: c.closed, timeout=20)
        call = c.calls[sid]
        assert call.grpc_status == 0, (call.headers, call.trailers)
        assert c.goaway, "no GOAWAY before the connection closed"
        assert srv.proc.wait(timeout=20) == 0
    finally:
        c.close()


def test_protocol_error_gets_goaway_then_close(server):
    """A frame HTTP/2 forbids (DATA on stream 0) ends the connection with a GOAWAY naming
    PROTOCOL_ERROR; the server goes on serving other connections."""
    require_grpc(server)
    with socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" +  # SETTINGS
                  b"\x00\x00\x04\x00\x00\x00\x00\x00\x00" + b"oops")  # DATA on stream 0
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    frames, pos = [], 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos:pos + 3], "big")
        frames.append((data[pos + 3], data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    goaways = [payload for kind, payload in frames if kind == 0x7]
    assert goaways, f"no GOAWAY among frame types {[k for k, _ in frames]}"
    assert int.from_bytes(goaways[0][4:8], "big") == 0x1  # PROTOCOL_ERROR
    c = RawH2(server.grpc_port)
    try:
        assert c.call("/no.Such/Method", frame(b"")).grpc_status == 12
    finally:
        c.close()
