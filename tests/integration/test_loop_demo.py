"""scripts/loop_demo.py, the learning loop end to end, keeps working: v2 is trained from the
archived feedback and labels, published, served, and catches the new fraud ring v1 missed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import dais_binary

ROOT = Path(__file__).resolve().parents[2]


def test_loop_demo_runs_end_to_end():
    build = dais_binary().parent.parent.parent  # <build>/src/cmd/dais
    r = subprocess.run(["/usr/bin/python3", str(ROOT / "scripts/loop_demo.py"), "--build",
                        str(build), "--orders", "1000"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    v1 = float(re.search(r"post-change held-out window, v1\s*\|\s*([\d.]+)", out).group(1))
    v2 = float(re.search(r"post-change held-out window, v2\s*\|\s*([\d.]+)", out).group(1))
    assert v2 > v1 + 0.02, out
    caught = re.search(r"fresh batch, v2 \(served\)\s*\|\s*(\d+) of (\d+)", out)
    assert int(caught.group(1)) > int(caught.group(2)) // 2, out
    print(out, file=sys.stderr)
