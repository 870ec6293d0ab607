"""A small OpenTelemetry collector for the tracing tests: an OTLP/HTTP JSON receiver on a free
loopback port that keeps every span POSTed to /v1/traces (with its service name)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Collector:
    """An OTLP/HTTP receiver: keeps every span POSTed to /v1/traces."""

    def __init__(self):
        self.spans, self.bad = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    assert self.path == "/v1/traces", self.path
                    assert self.headers["content-type"] == "application/json"
                    doc = json.loads(body)
                    for rs in doc["resourceSpans"]:
                        service = rs["resource"]["attributes"][0]["value"]["stringValue"]
                        for ss in rs["scopeSpans"]:
                            for s in ss["spans"]:
                                outer.spans.append({**s, "service": service})
                    self.send_response(200)
                except Exception as e:  # noqa: BLE001 - reported by the test
                    outer.bad.append(repr(e))
                    self.send_response(400)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
