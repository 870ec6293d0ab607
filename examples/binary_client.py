#!/usr/bin/python3
"""Sends one request with Triton's binary tensor data extension and decodes the binary answer.

usage: binary_client.py HOST:PORT
"""
import json
import struct
import sys

import requests

url = sys.argv[1] if len(sys.argv) > 1 else "localhost:8000"
rows = [[float(i + j) / 16 for i in range(16)] for j in range(3)]
raw = b"".join(struct.pack("<16f", *r) for r in rows)
header = json.dumps({
    "inputs": [{"name": "INPUT__0", "shape": [3, 16], "datatype": "FP32",
                "parameters": {"binary_data_size": len(raw)}}],
    "outputs": [{"name": "OUTPUT__0", "parameters": {"binary_data": True}}],
}).encode()
resp = requests.post(f"http://{url}/v2/models/mlp_small/infer", data=header + raw,
                     headers={"Inference-Header-Content-Length": str(len(header)),
                              "Content-Type": "application/octet-stream"})
resp.raise_for_status()
hlen = int(resp.headers["Inference-Header-Content-Length"])
meta = json.loads(resp.content[:hlen])
out = meta["outputs"][0]
values = struct.unpack(f"<{out['parameters']['binary_data_size'] // 4}f", resp.content[hlen:])
print(f"request: {len(header)} bytes of JSON + {len(raw)} bytes of FP32")
print(f"response header: {json.dumps(meta)}")
for r in range(out["shape"][0]):
    print(f"  row {r}: " + ", ".join(f"{v:.4f}" for v in values[r * 4:(r + 1) * 4]))
