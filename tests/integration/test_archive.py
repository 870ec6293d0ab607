"""`dais archive` (issue 33, part 1): a stream archived into day-partitioned jsonl.gz parts exactly
once, across kill -9 of the archiver at random moments, and across archivers of one group (a dead
one's entries claimed by another). Real redis-server; the parts are read back with Python's gzip
and compared with the stream's own ids (XRANGE)."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RespError, dais_binary, redis_call

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


def archived(root: Path, dataset: str) -> list[dict]:
    rows = []
    for part in sorted((root / dataset).glob("dt=*/part-*.jsonl.gz")):
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
