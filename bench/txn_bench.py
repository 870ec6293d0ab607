#!/usr/bin/python3
"""`dais txn` (issue 16): place_order throughput and latency at concurrency 1, 16 and 64, side by
side in one run with
  single-db   the same writes (INSERT the order, UPDATE the stock) as ONE local transaction in ONE
              database, driven by pgbench (the upper bound: no HTTP, no coordinator, no 2PC);
  2pc         `dais txn`, two participants + the decision log, no model gate (place_order_nogate);
  2pc+gate    the same with the XGBoost fraud gate (feature lookup in Redis + ModelInfer over gRPC
              to `dais serve`), the example's place_order;
then the commit-to-visible time (from the caller's answer until the purchased item is first in
the user's recent-items feature in Redis: outbox relay -> Redis stream -> consumer), and the
recovery time after a `kill -9` of the coordinator with 1,000 requests in flight.

Real PostgreSQL 15 servers (fsync on), redis-server, `dais serve`, wrk. Prints tables; the
figures in docs/benchmarks.md come from this script.

usage: bench/txn_bench.py [--seconds 8] [--visible 2000] [--build build/release]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DAIS_BIN", str(ROOT / "build/release/src/cmd/dais"))
from conftest import Resp  # noqa: E402
from txn_util import (EXAMPLE, PgServer, TxnProcess, setup_shop,  # noqa: E402
                      start_shop_services, stop_all, write_txn_yaml)

ITEMS = 1000
CONCURRENCY = (1, 16, 64)

WRK_LUA = """
local threads = 0
function setup(thread) thread:set("tid", threads); threads = threads + 1 end
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function request()
  n = n + 1
  local body = string.format(
    '{"order_id":"%s-%d-%d","user_id":%d,"item_id":%d,"quantity":1,"amount":25.0}',
    PREFIX, tid, n, 1 + (n * 7919 + tid) % 100000, 1 + (n * 31 + tid * 17) % ITEMS)
  return wrk.format(nil, nil, nil, body)
end
"""

PGBENCH_SQL = """\\set item random(1, {items})
\\set uid random(1, 100000)
BEGIN;
INSERT INTO orders (order_id, user_id, item_id, quantity, amount)
  VALUES (gen_random_uuid()::text, :uid, :item, 1, 25.0);
UPDATE stock SET qty = qty - 1 WHERE item_id = :item AND qty >= 1;
END;
"""


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else float("nan")


def wrk_script(tmp, prefix):
    """A wrk script posting orders with unique ids (prefix-thread-n), spread over users and items."""
    lua = Path(tmp) / f"txn-{prefix}.lua"
    lua.write_text(WRK_LUA.replace("PREFIX", f'"{prefix}"').replace("ITEMS", str(ITEMS)))
    return lua


def run_wrk(url, prefix, conc, seconds, tmp):
    lua = wrk_script(tmp, prefix)
    out = subprocess.run(["wrk", "-t", "1" if conc == 1 else "2", "-c", str(conc), "-d",
                          f"{seconds}s", "--latency", "-s", str(lua), url],
                         capture_output=True, text=True, check=True).stdout

    def lat(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + \
        (sum(int(g) for g in sock.groups()) if sock else 0)
    total = int(re.search(r"(\d+) requests in", out).group(1))
    # tps counts committed transactions only; refusals (gate down or slow under overload,
    # prepare budget exceeded) are in "err".
    return {"tps": (total - errors) / seconds, "p50": lat(50), "p99": lat(99), "errors": errors}


def run_pgbench(pg, conc, seconds, tmp):
    script = Path(tmp) / "single.sql"
    script.write_text(PGBENCH_SQL.format(items=ITEMS))
    logdir = Path(tmp) / f"pgb-{conc}"
    logdir.mkdir()
    subprocess.run(["pgbench", "-n", "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres",
                    "-f", str(script), "-c", str(conc), "-j", str(min(conc, 2)), "-T",
                    str(seconds), "-l", "--log-prefix", str(logdir / "log"), "single"],
                   capture_output=True, text=True, check=True)
    lat_ms = []
    for f in logdir.iterdir():
        for line in f.read_text().splitlines():
            lat_ms.append(int(line.split()[2]) / 1000.0)
    return {"tps": len(lat_ms) / seconds, "p50": percentile(lat_ms, 50),
            "p99": percentile(lat_ms, 99), "errors": 0}


def commit_to_visible(t, redis_port, n):
    """Sequential orders from fresh users; for each, the time from the answer until the item is
    first in the user's recent_items (polled in Redis)."""
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", t.port, timeout=10)
    r = Resp(redis_port)
    out = []
    for i in range(n):
        user, item = 700000 + i, 1 + i % ITEMS
        body = json.dumps({"order_id": f"vis-{i}-{time.time_ns()}", "user_id": user,
                           "item_id": item, "quantity": 1, "amount": 25.0})
        conn.request("POST", "/v1/txn/place_order", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        answered = time.perf_counter()
        if resp.status != 200:
            continue
        key = f"dais:shop:{{user_id={user}}}:user_purchases:v1"
        want = item.to_bytes(8, "little", signed=True)
        while True:
            v = r.call("HGET", key, "recent_items")
            if v and v[:8] == want:
                break
            if time.perf_counter() - answered > 10:
                raise RuntimeError(f"order {i} not visible after 10 s")
        out.append((time.perf_counter() - answered) * 1000)
    r.close()
    return out


def recovery(shop, args, tmp, log_dir):
    """kill -9 with 1,000 requests in flight, then the restart's recovery."""
    orders, inventory = shop["orders"], shop["inventory"]
    t = TxnProcess(shop["args"] + ["--workers", "200"], log_dir)
    wrk = subprocess.Popen(["wrk", "-t", "2", "-c", "1000", "-d", "30s", "--timeout", "30s", "-s",
                            str(wrk_script(tmp, "recovery")),
                            f"{t.url}/v1/txn/place_order_nogate"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)  # the load established (benchmark pacing, not a test wait)
    t.proc.send_signal(signal.SIGKILL)
    t.proc.wait()
    wrk.kill()
    wrk.wait()
    left = len(orders.prepared("shop")) + len(inventory.prepared("shop"))
    decided = shop["log"].query("coordinator", "SELECT count(*) FROM dais_txn_log "
                                               "WHERE state = 'commit'")[0][0]
    start = time.perf_counter()
    t2 = TxnProcess(shop["args"] + ["--workers", "32"], log_dir, wait=False)
    while orders.prepared("shop") or inventory.prepared("shop"):
        time.sleep(0.005)
    resolved_s = time.perf_counter() - start
    t2.wait_started()
    serving_s = time.perf_counter() - start
    m = re.search(r"txn recovery: (\d+) action", t2.log_text())
    t2.stop()
    committed = orders.query("shop", "SELECT count(*) FROM orders WHERE order_id LIKE 'recovery-%%'")
    return {"prepared_left": left, "decided_not_done": decided, "committed": committed[0][0], "resolved_s": resolved_s,
            "serving_s": serving_s, "actions": int(m.group(1)) if m else -1}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--visible", type=int, default=2000)
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    args = ap.parse_args()
    os.environ["DAIS_BIN"] = str(Path(args.build) / "src/cmd/dais")
    tmp = Path(tempfile.mkdtemp(prefix="dais-txn-bench-"))
    pgs = [PgServer(n, fsync=True) for n in ("orders", "inventory", "log")]
    procs = []
    try:
        items = {i: 10_000_000 for i in range(1, ITEMS + 1)}
        setup_shop(*pgs, items)
        single = pgs[0]
        single.create_db("single", EXAMPLE / "schema_orders.sql")
        single.execute("single", (EXAMPLE / "schema_inventory.sql").read_text())
        single.execute("single", f"INSERT INTO stock SELECT g, 10000000 FROM "
                                 f"generate_series(1, {ITEMS}) g")
        redis_port, grpc, repo, _ = start_shop_services(tmp, procs)
        txn_yaml = write_txn_yaml(tmp / "txn.yaml", *pgs)  # the example's 300 / 50 ms budgets
        base_args = ["--config", str(txn_yaml), "--id", "bench",
                     "--gate-server", f"127.0.0.1:{grpc}", "--redis", f"127.0.0.1:{redis_port}",
                     "--feature-spec", str(repo / "recommend/features.yaml"), "--recent-items",
                     "--stream", "shop:purchases", "--consumer", "bench"]
        t = TxnProcess(base_args + ["--workers", "64"], tmp / "logs")
        rows = []
        for conc in CONCURRENCY:
            row = {"conc": conc, "single-db": run_pgbench(single, conc, args.seconds, tmp)}
            for name, type_ in (("2pc", "place_order_nogate"), ("2pc+gate", "place_order")):
                row[name] = run_wrk(f"{t.url}/v1/txn/{type_}", f"{name}-{conc}", conc,
                                    args.seconds, tmp)
            rows.append(row)
        print(f"\nplace_order, {args.seconds} s per cell (tps = transactions/s; ms)")
        print(f"{'conc':>4} | {'single-db tps':>13} {'p50':>7} {'p99':>7} | {'2pc tps':>8} "
              f"{'p50':>7} {'p99':>7} {'err':>4} | {'2pc+gate tps':>12} {'p50':>7} {'p99':>7} "
              f"{'err':>4} | {'gate/single':>11}")
        for r in rows:
            s, a, g = r["single-db"], r["2pc"], r["2pc+gate"]
            print(f"{r['conc']:>4} | {s['tps']:>13.0f} {s['p50']:>7.2f} {s['p99']:>7.2f} | "
                  f"{a['tps']:>8.0f} {a['p50']:>7.2f} {a['p99']:>7.2f} {a['errors']:>4} | "
                  f"{g['tps']:>12.0f} {g['p50']:>7.2f} {g['p99']:>7.2f} {g['errors']:>4} | "
                  f"{g['tps'] / s['tps']:>11.2f}")
        try:
            vis = commit_to_visible(t, redis_port, args.visible)
        except Exception:
            print(t.log_text()[-3000:])
            if os.environ.get("DAIS_TXN_BENCH_PAUSE"):
                print(f"PAUSED coordinator pid {t.proc.pid}", flush=True)
                time.sleep(600)
            raise
        print(f"\ncommit-to-visible over {len(vis)} orders (answer -> item first in recent_items "
              f"in Redis): p50 {percentile(vis, 50):.2f} ms, p99 {percentile(vis, 99):.2f} ms, "
              f"p99.9 {percentile(vis, 99.9):.2f} ms, max {max(vis):.2f} ms")
        t.stop()
        rec = recovery({"orders": pgs[0], "inventory": pgs[1], "log": pgs[2],
                        "args": base_args}, args, tmp, tmp / "logs")
        print(f"\nrecovery after kill -9 with 1,000 requests in flight (200 workers, 2pc without "
              f"gate, killed 3 s into the load after {rec['committed']} commits): "
              f"{rec['prepared_left']} prepared transactions left on the participants, "
              f"{rec['decided_not_done']} commit decisions not yet marked done, "
              f"{rec['actions']} recovery actions; all resolved {rec['resolved_s']:.2f} s after "
              f"the restart, serving again after {rec['serving_s']:.2f} s")
    finally:
        stop_all(procs, pgs, tmp)


if __name__ == "__main__":
    main()
