"""`dais archive` (issue 33, part 1): a stream archived into day-partitioned jsonl.gz parts exactly
once, across kill -9 of the archiver at random moments, and across archivers of one group (a dead
one's entries claimed by another). Real redis-server; the parts are read back with Python's gzip
and compared with the stream's own ids (XRANGE)."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import requests

from conftest import RespError, dais_binary, metric_value, parse_prometheus, redis_call

FILL = """
for i = 1, tonumber(ARGV[1]) do
  redis.call('XADD', KEYS[1], '*', 'id', 'r' .. ARGV[2] .. '-' .. i,
             'record', '{"model":"fraud","n":' .. i .. ',"x":[1.5,2]}')
end
return redis.call('XLEN', KEYS[1])
"""


def fill(redis_server, stream: str, n: int, tag: str) -> int:
    return redis_call(redis_server.port, "EVAL", FILL, "1", stream, str(n), tag)


def stream_ids(redis_server, stream: str) -> list[str]:
    ids, start = [], "-"
    while True:
        page = redis_call(redis_server.port, "XRANGE", stream, start, "+", "COUNT", "5000")
        if not page:
            return ids
        ids += [e[0].decode() if isinstance(e[0], bytes) else e[0] for e in page]
        last = ids[-1]
        ms, seq = last.split("-")
        start = f"{ms}-{int(seq) + 1}"


def data_files(root: Path, dataset: str = "feedback") -> list[Path]:
    """Parts and compacted files (what a reader of the dataset reads: not '.' or '_' names)."""
    return sorted(p for p in (root / dataset).glob("dt=*/*.jsonl.gz")
                  if not p.name.startswith((".", "_")))


def archived(root: Path, dataset: str) -> list[dict]:
    rows = []
    for part in data_files(root, dataset):
        with gzip.open(part, "rt") as f:
            rows += [json.loads(line) for line in f]
    return rows


def archive(redis_server, root: Path, stream: str, consumer: str, *extra, log: Path):
    """`dais archive` with small parts (500 records or 100 ms) unless `extra` says otherwise."""
    defaults = []
    for flag, value in (("--max-records", "500"), ("--max-age-ms", "100")):
        if flag not in extra:
            defaults += [flag, value]
    return subprocess.Popen(
        [str(dais_binary()), "archive", "--redis", redis_server.addr, "--stream", stream,
         "--consumer", consumer, "--root", str(root), "--dataset", "feedback", *defaults,
         *extra],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def pending(redis_server, stream: str) -> int:
    """Entries delivered to the archive group and not acknowledged (0 before the group exists)."""
    try:
        return redis_call(redis_server.port, "XPENDING", stream, "archive")[0]
    except RespError:
        return 0


def part_count(root: Path) -> int:
    return len(list((root / "feedback").glob("dt=*/part-*.jsonl.gz")))


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_archive_is_exactly_once_across_kill_9(redis_server, tmp_path):
    stream, root, log = "fb:exact", tmp_path / "offline", tmp_path / "archive.log"
    rng = random.Random(33)
    fill(redis_server, stream, 30000, "a")
    for round_ in range(6):
        p = archive(redis_server, root, stream, "a1", log=log)
        # Killed at a random moment once it has written a part: parts of 500 records come every
        # few milliseconds, so the kill lands anywhere in the read / write / rename / XACK cycle.
        start = part_count(root)
        wait_for(lambda: part_count(root) > start or p.poll() is not None, 30,
                 f"a part ({log.read_text()[-2000:]})")
        time.sleep(rng.uniform(0, 0.2))
        assert p.poll() is None, log.read_text()[-2000:]
        p.kill()
        p.wait()
        fill(redis_server, stream, 3000, f"b{round_}")
    p = archive(redis_server, root, stream, "a1", "--drain", log=log)
    assert p.wait(60) == 0, log.read_text()[-3000:]
    rows = archived(root, "feedback")
    ids = [r["entry_id"] for r in rows]
    want = stream_ids(redis_server, stream)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} entries archived twice"
    assert sorted(ids) == sorted(want), f"{len(set(want) - set(ids))} entries missing"
    # Each row carries the entry's fields, the record as JSON, in its day's partition.
    assert rows[0]["record"]["model"] == "fraud" and rows[0]["stream"] == stream
    assert not list((root / "feedback").glob("dt=*/.part-*")), "a temporary part was left"
    assert pending(redis_server, stream) == 0


def test_a_dead_archivers_entries_are_claimed_by_another(redis_server, tmp_path):
    stream, root, log = "fb:claim", tmp_path / "offline", tmp_path / "archive.log"
    fill(redis_server, stream, 5000, "c")
    # a1 reads a large batch and dies before writing it: its entries stay pending.
    p = archive(redis_server, root, stream, "a1", "--max-age-ms", "60000", "--claim-idle-ms",
                "120000", "--max-records", "100000", log=log)
    wait_for(lambda: pending(redis_server, stream) >= 1000, 30, "a1 to take entries")
    p.kill()
    p.wait()
    # Claimable once idle for --claim-idle-ms.
    wait_for(lambda: redis_call(redis_server.port, "XPENDING", stream, "archive", "IDLE", "300",
                                "-", "+", "1"), 10, "a1's entries to be idle")
    p = archive(redis_server, root, stream, "a2", "--drain", "--claim-idle-ms", "300", log=log)
    assert p.wait(60) == 0, log.read_text()[-3000:]
    ids = [r["entry_id"] for r in archived(root, "feedback")]
    assert len(ids) == len(set(ids)) == 5000
    assert pending(redis_server, stream) == 0


def test_bad_arguments_are_clear(redis_server, tmp_path):
    r = subprocess.run([str(dais_binary()), "archive", "--redis", redis_server.addr, "--stream",
                        "s", "--root", str(tmp_path), "--dataset", "d", "--consumer", "a/b"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--consumer" in r.stdout + r.stderr
    r = subprocess.run([str(dais_binary()), "archive", "--redis", redis_server.addr, "--stream",
                        "s", "--root", str(tmp_path), "--dataset", "d", "--consumer", "a",
                        "--max-age-ms", "20000", "--claim-idle-ms", "30000"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "at most half of --claim-idle-ms" in r.stdout + r.stderr
    r = subprocess.run([str(dais_binary()), "archive", "--stream", "s"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0 and "--root" in r.stdout + r.stderr


def compact(root: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(dais_binary()), "archive", "compact", "--root", str(root),
                           "--dataset", "feedback", *extra],
                          capture_output=True, text=True, timeout=60)


def test_compaction_bounds_the_files_and_keeps_every_entry_once(redis_server, tmp_path):
    stream, root, log = "fb:compact", tmp_path / "offline", tmp_path / "archive.log"
    fill(redis_server, stream, 12000, "k")
    for consumer in ("a1", "a2"):  # two archivers' parts, 500 records each
        p = archive(redis_server, root, stream, consumer, "--drain", log=log)
        assert p.wait(60) == 0, log.read_text()[-3000:]
        fill(redis_server, stream, 3000, consumer)
    p = archive(redis_server, root, stream, "a1", "--drain", log=log)
    assert p.wait(60) == 0, log.read_text()[-3000:]
    want = sorted(stream_ids(redis_server, stream))
    parts = data_files(root)
    assert len(parts) >= 30
    newest = {}
    for f in parts:
        consumer, seq = f.name[len("part-"):-len(".jsonl.gz")].rsplit("-", 1)
        newest[consumer] = max(newest.get(consumer, 0), int(seq))

    r = compact(root)
    assert r.returncode == 0, r.stdout + r.stderr
    after = data_files(root)
    # One compacted file per day (the target is far above the whole), and each archiver's newest
    # part untouched: a restarted archiver reads its ids.
    names = {f.name for f in after}
    assert {f"part-{c}-{s}.jsonl.gz" for c, s in newest.items()} <= names
    assert len([n for n in names if n.startswith("compacted-")]) == len(
        {f.parent for f in after}), names
    assert len(after) < len(parts) / 5, names
    ids = [row["entry_id"] for row in archived(root, "feedback")]
    assert sorted(ids) == want
    assert "files ->" in r.stdout

    # An archiver restarted after the compaction writes nothing twice.
    fill(redis_server, stream, 1000, "z")
    p = archive(redis_server, root, stream, "a2", "--drain", log=log)
    assert p.wait(60) == 0, log.read_text()[-3000:]
    want = sorted(stream_ids(redis_server, stream))
    assert sorted(row["entry_id"] for row in archived(root, "feedback")) == want

    day = after[0].parent
    # A compaction killed after writing its target and before removing its sources: the next
    # run finishes it (removes the sources)...
    fill(redis_server, stream, 2000, "y")
    for c in ("a1", "a2"):
        p = archive(redis_server, root, stream, c, "--drain", "--max-records", "500", log=log)
        assert p.wait(60) == 0, log.read_text()[-3000:]
    srcs = [f for f in data_files(root) if f.name.startswith("part-")]
    newest = {}
    for f in srcs:
        consumer, seq = f.name[len("part-"):-len(".jsonl.gz")].rsplit("-", 1)
        newest[consumer] = max(newest.get(consumer, 0), int(seq))
    srcs = [f for f in srcs if f.parent == day and f.name not in
            {f"part-{c}-{s}.jsonl.gz" for c, s in newest.items()}][:2]
    assert len(srcs) == 2, [f.name for f in data_files(root)]
    target = day / "compacted-1-0.jsonl.gz"
    with open(target, "wb") as out:
        for f in srcs:
            out.write(f.read_bytes())
    (day / ".compact-intent").write_text(
        f"target {target.name}\n" + "".join(f"source {f.name}\n" for f in srcs))
    # ... and one killed before its target was in place is undone (the half-written file goes).
    (day / ".compacted-2-0.jsonl.gz.tmp").write_bytes(b"half")
    r = compact(root)
    assert r.returncode == 0 and "1 interrupted compactions recovered" in r.stdout, r.stdout
    assert not (day / ".compact-intent").exists()
    want = sorted(stream_ids(redis_server, stream))
    assert sorted(row["entry_id"] for row in archived(root, "feedback")) == want
    for name in (".compact-intent", "compacted-2-0.jsonl.gz"):
        (day / name).unlink(missing_ok=True)
    (day / ".compact-intent").write_text("target compacted-2-0.jsonl.gz\nsource "
                                         f"{data_files(root)[0].name}\n")
    r = compact(root)
    assert r.returncode == 0 and "1 interrupted compactions recovered" in r.stdout, r.stdout
    assert not (day / ".compacted-2-0.jsonl.gz.tmp").exists()
    assert sorted(row["entry_id"] for row in archived(root, "feedback")) == want

    r = compact(tmp_path / "nowhere")
    assert r.returncode == 1 and "no dataset directory" in r.stderr
    shutil.rmtree(root)


def test_archive_metrics(redis_server, tmp_path):
    stream, root, log = "fb:metrics", tmp_path / "offline", tmp_path / "archive.log"
    fill(redis_server, stream, 3000, "m")
    p = archive(redis_server, root, stream, "a1", "--metrics-port", "0", log=log)
    try:
        wait_for(lambda: "ports: metrics=" in log.read_text(), 30, "the metrics port")
        port = int(log.read_text().split("ports: metrics=")[1].split()[0])

        def samples():
            return parse_prometheus(requests.get(f"http://127.0.0.1:{port}/metrics",
                                                 timeout=5).text)

        labels = {"stream": stream, "dataset": "feedback"}
        wait_for(lambda: metric_value(samples(), "dais_archive_records_total", **labels) == 3000
                 and metric_value(samples(), "dais_archive_lag_entries", **labels) == 0,
                 30, "3000 records archived, no lag")
        s = samples()
        assert metric_value(s, "dais_archive_files_total", **labels) == part_count(root)
        assert metric_value(s, "dais_archive_bytes_total", **labels) == sum(
            f.stat().st_size for f in data_files(root))
        assert metric_value(s, "dais_archive_lag_seconds", **labels) == 0
        assert metric_value(s, "dais_archive_flush_duration_seconds_count", **labels) >= 6
        promtool = shutil.which("promtool") or "/usr/bin/promtool"
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        p.terminate()
        assert p.wait(30) == 0
