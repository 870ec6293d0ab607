"""Issue 35: the README's "Using it" commands, run as written on the example models (ports made
free ones, Redis the test's, `dais perf`'s windows shortened): every curl answers 2xx, the pushed
row is served (not OUTSIDE_MAX_AGE the day after the README was written), the sample offline
data imports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import requests

from conftest import free_port, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]


def using_it_blocks() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def run_block(block: str, dais_bin, subs: dict[str, str], tmp_path, name: str) -> str:
    """Starts the block's first command (a `dais serve`) in the background, waits until it is
    ready, runs the rest with bash (-e: a failing command fails the block), returns its output."""
    for old, new in subs.items():
        block = block.replace(old, new)
    block = block.replace("build/release/src/cmd/dais", str(dais_bin))
    block = re.sub(r"\bcurl ", "curl -sS -f ", block)
    serve, rest = block.split("\n", 1)
    assert " serve " in serve, serve
    http = subs["localhost:8000"].split(":")[1]
    if "--http-port" not in serve:  # the default, 8000
        serve += f" --http-port {http}"
    log = open(tmp_path / f"{name}.log", "wb")
    server = subprocess.Popen(serve.split() + ["--grpc-port", subs["localhost:8001"].split(":")[1],
                                               "--metrics-port", http],
                              cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        def ready():
            assert server.poll() is None, (tmp_path / f"{name}.log").read_text()
            try:
                return requests.get(f"http://127.0.0.1:{http}/v2/health/ready",
                                    timeout=2).status_code == 200
            except requests.RequestException:
                return False
        wait_for(ready, 60, f"README's {name} server ready")
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", rest], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"README block failed ({r.returncode}):\n{rest}\n" \
            f"--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
        return r.stdout + r.stderr
    finally:
        server.terminate()
        server.wait(30)


def test_readme_using_it_runs_as_written(dais_bin, redis_server, tmp_path):
    subprocess.run([str(REPO_ROOT / "scripts" / "gen_examples.sh")], check=True,
                   capture_output=True, timeout=300)
    blocks = using_it_blocks()
    assert len(blocks) == 2, blocks
    http, grpc = free_port(), free_port()
    subs = {"localhost:8000": f"localhost:{http}", "--http-port 8000": f"--http-port {http}",
            "localhost:8001": f"localhost:{grpc}", "127.0.0.1:6379": redis_server.addr,
            "--concurrency-range 1:64:x4": "--concurrency-range 1:64:x4 "
                                           "--measurement-interval-ms 200"}
    out = run_block(blocks[0], dais_bin, subs, tmp_path, "models")
    assert '"outputs"' in out and "dais_request_duration_seconds" in out, out

    out = run_block(blocks[1], dais_bin, subs, tmp_path, "features")
    assert "OUTSIDE_MAX_AGE" not in out, out
    assert re.search(r'"values":\[31(\.0)?\]', out.replace(" ", "")), out  # the pushed age
    assert re.search(r"1,?000 rows|rows: 1000|1000 row", out), out
