#!/usr/bin/python3
"""Archive throughput (issue 33): streams::Archiver against the raw XREADGROUP rate of the same
stream, in the same run.

Starts its own redis-server on a free loopback port (no persistence), fills one stream with
--entries feedback-shaped entries (bench/archive_bench fill), then --repeat rounds of the phases
below, each reading the whole stream from its start in a consumer group made afresh:
  read      XREADGROUP COUNT 1000 until every entry came, nothing acknowledged (the reference)
  read_ack  the same plus XACK of every batch
  encode    the entries (read beforehand) into JSON lines and gzip level 1, in memory alone
  archive   streams::Archiver: JSON lines, gzip, part files (fsync, rename), XACK; it ends as a
            drain does, with one empty XREADGROUP BLOCK 200 after the last entry
Prints the medians: records/s, this process's CPU seconds, redis-server's CPU seconds, and the
ratio to `read`. Goals: archive >= 50,000 records/s on one core, ratio >= 0.5.

usage: bench/archive_bench.py [--entries 300000] [--repeat 5] [--build build/release]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cpu_seconds  # noqa: E402
from feature_bench import start_redis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ["read", "read_ack", "encode", "archive"]


def run(binary, port, tmp, entries, phases, redis_pid):
    """One bench/archive_bench run; {phase: result} with redis-server's CPU over the run."""
    before = cpu_seconds(redis_pid)
    r = subprocess.run([binary, "--redis", f"127.0.0.1:{port}", "--dir", tmp, "--entries",
                        str(entries), "--phases", ",".join(phases)],
                       capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row["phase"]] = row
    if len(phases) == 1:
        out[phases[0]]["redis_cpu_s"] = cpu_seconds(redis_pid) - before
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=300000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench/archive_bench")
    if not os.path.exists(binary):
        sys.exit(f"{binary} is missing: build it (cmake --build {args.build} -t archive_bench)")
    tmp = tempfile.mkdtemp(prefix="archive-bench-")
    redis, port = start_redis(tmp)
    try:
        run(binary, port, tmp, args.entries, ["fill"], redis.pid)
        rows = {p: [] for p in PHASES}
        for _ in range(args.repeat):
            for phase in PHASES:  # one process per phase: redis-server's CPU is the phase's
                rows[phase].append(run(binary, port, tmp, args.entries, [phase], redis.pid)[phase])
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(phase, key):
        return statistics.median(r[key] for r in rows[phase])

    ref = med("read", "records_per_s")
    print(f"{args.entries} entries, median of {args.repeat} rounds "
          f"(this machine: {os.cpu_count()} cores)\n")
    print("| phase | records/s | seconds | CPU s (dais) | CPU s (redis-server) | ratio to read |")
    print("|---|---:|---:|---:|---:|---:|")
    for phase in PHASES:
        rps = med(phase, "records_per_s")
        print(f"| {phase} | {rps:,.0f} | {med(phase, 'seconds'):.2f} | {med(phase, 'cpu_s'):.2f}"
              f" | {med(phase, 'redis_cpu_s'):.2f} | {rps / ref:.2f} |")
    arch_cpu = med("archive", "cpu_s")
    print(f"\narchive per CPU second of dais: {args.entries / arch_cpu:,.0f} records "
          f"(goal >= 50,000 on one core); ratio to read "
          f"{med('archive', 'records_per_s') / ref:.2f} (goal >= 0.5)")


if __name__ == "__main__":
    main()
