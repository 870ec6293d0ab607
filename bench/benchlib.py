"""Pieces shared by bench/serve_bench.py and bench/compare_bench.py: batch-1 request bodies,
a wrk run with its output parsed, per-process CPU time, and a copy of the example repository
with another max_queue_delay_microseconds."""
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

CLK_TCK = os.sysconf("SC_CLK_TCK")


def request_bodies(width):
    """{"json": (body, 0), "binary": (body, header length)}: one FP32 row of `width` values for
    INPUT__0, as KServe v2 JSON and with the binary tensor data extension."""
    row = [((i * 37) % 17) / 17.0 for i in range(width)]
    js = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [1, width], "datatype": "FP32",
                                 "data": row}]}).encode()
    raw = struct.pack(f"<{width}f", *row)
    header = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [1, width], "datatype": "FP32",
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return {"json": (js, 0), "binary": (header + raw, len(header))}


def run_wrk(url, body, header_len, conc, seconds, tmp, lua_extra=""):
    """POSTs `body` with wrk at `conc` connections for `seconds`; returns rps, p50_us, p99_us,
    errors (non-2xx responses plus socket errors). `lua_extra` is appended to the wrk script
    (e.g. a `request` function that varies the body)."""
    path = os.path.join(tmp, "body.bin")
    with open(path, "wb") as f:
        f.write(body)
    lua = os.path.join(tmp, "req.lua")
    with open(lua, "w") as f:
        f.write('local f = io.open("%s", "rb")\nwrk.body = f:read("*all")\nf:close()\n' % path)
        f.write('wrk.method = "POST"\n')
        if header_len:
            f.write('wrk.headers["Content-Type"] = "application/octet-stream"\n')
            f.write('wrk.headers["Inference-Header-Content-Length"] = "%d"\n' % header_len)
        else:
            f.write('wrk.headers["Content-Type"] = "application/json"\n')
        f.write(lua_extra)
    threads = "1" if conc == 1 else "2"
    out = subprocess.run(["wrk", "-t", threads, "-c", str(conc), "-d", f"{max(1, seconds)}s",
                          "--latency", "-s", lua, url], capture_output=True, text=True,
                         check=True).stdout

    def lat(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    n_err = (int(errors.group(1)) if errors else 0) + \
        (sum(int(g) for g in sock.groups()) if sock else 0)
    total = re.search(r"(\d+) requests in", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50_us": lat(50), "p99_us": lat(99), "errors": n_err,
            "requests": int(total.group(1)) if total else 0}


def cpu_seconds(pid):
    """utime + stime of one process (all its threads); 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_ticks():
    """(all CPU time, the part the hypervisor gave to other guests: "steal") of the machine, in
    ticks, from /proc/stat's first line; (0, 0) where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    return sum(fields), fields[7] if len(fields) == 8 else 0


def steal_percent(before, after):
    """The host's share (%) of the CPU time between two cpu_ticks() readings."""
    total = after[0] - before[0]
    return 100.0 * (after[1] - before[1]) / total if total > 0 else float("nan")


def repo_with_queue_delay(repo, models, delay_us, prefix):
    """A temporary copy of `models` from `repo` whose configs use max_queue_delay_microseconds
    `delay_us`; the caller deletes it."""
    copy = tempfile.mkdtemp(prefix=prefix)
    for m in models:
        shutil.copytree(os.path.join(repo, m), os.path.join(copy, m))
        cfg = os.path.join(copy, m, "config.pbtxt")
        if not os.path.exists(cfg):
            continue
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(re.sub(r"max_queue_delay_microseconds:\s*\d+",
                           f"max_queue_delay_microseconds: {delay_us}", text))
    return copy


def nginx_conf(tmp, http_body, workers=1):
    """An nginx.conf (Debian's nginx-light, as a user's process) whose pid file, logs and
    temporary folders are under `tmp`, with `http_body` (upstreams, server blocks) inside http."""
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    return f"""worker_processes {workers};
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
daemon off;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
{http_body}
}}
"""


def get_ok(url):
    """True when GET url answers 200 within 2 s."""
    import urllib.request
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def example_repository(root):
    """The example model repository under `root` (examples/model_repository), generated by
    scripts/gen_models.py when its models are not there yet."""
    from pathlib import Path
    repo = Path(root) / "examples/model_repository"
    if not (repo / "mlp_small/1/model.pt").exists():
        subprocess.run(["/usr/bin/python3", str(Path(root) / "scripts/gen_models.py"), str(repo)],
                       check=True)
    return repo


def mlp_layers(model_pt):
    """"256->768->768->10": the widths of an example MLP (mlp_heavy's width is chosen by
    scripts/gen_models.py on the machine that generated it, so a figure needs it beside it)."""
    out = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys, torch\n"
         "w = [p.shape for n, p in torch.jit.load(sys.argv[1]).named_parameters()"
         " if n.endswith('weight')]\n"
         "print('->'.join(str(x) for x in [w[0][1]] + [s[0] for s in w]))", str(model_pt)],
        capture_output=True, text=True)
    return out.stdout.strip() or f"(unreadable: {out.stderr.strip()[-200:]})"
