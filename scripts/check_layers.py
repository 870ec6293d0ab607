#!/usr/bin/python3
"""Checks the layering of docs/architecture.md ("Layering"): a folder of src/ includes headers
only from the folders it may depend on. Tests (*_test.cc) are free. Exits 1 and names every
include that breaks the rule.

usage: scripts/check_layers.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> the folders it may include (besides itself and include/dais/).
ALLOWED = {
    "common": set(),
    "placement": {"common"},
    "etcd": {"common", "metrics", "tls"},
    "metrics": {"common"},
    "tls": {"common", "metrics"},
    "tensor": {"common"},
    "redis": {"common", "metrics", "tls"},
    "locks": {"common", "metrics", "redis", "runtime"},
    "features/spec": {"common", "tensor"},
    "features/cache": {"common", "metrics"},
    "features/offline": {"common", "features/spec"},
    "features/store": {"common", "metrics", "redis", "features/spec", "features/cache",
                       "features/offline"},
    "runtime": {"common", "metrics", "tensor", "features/spec"},
    "features/enrich": {"common", "runtime", "features/spec", "features/store"},
    "backends": {"common", "tensor", "runtime"},
    "server": {"common", "runtime"},
    "streams": {"common", "metrics", "tls", "redis", "server"},
    "learn": {"common", "features/spec"},
    "agents": {"common", "cluster"},
    "fed": {"common"},
    "memory": {"common", "metrics", "tls", "redis"},
    "cluster": {"common", "etcd", "metrics", "runtime", "placement"},
    "frontends": {"common", "metrics", "tls"},
    "frontends/http": {"common", "metrics", "tls", "tensor", "runtime", "server", "frontends",
                       "features/spec", "features/offline", "features/store", "memory"},
    "frontends/grpc": {"common", "metrics", "tls", "runtime", "server", "frontends", "memory"},
    "perf": {"common", "tensor", "tls"},
    "gateway": {"common", "metrics", "tls", "etcd", "cluster", "frontends", "frontends/http",
                "frontends/grpc"},
    "txn": {"common", "metrics", "tls", "redis", "streams", "features/spec", "features/store",
            "frontends", "frontends/http", "frontends/grpc", "cluster"},
}
# cmd wires everything together and may include any folder.


def folder(path):
    parts = path.split("/")
    if parts[0] in ("features", "frontends") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    if parts[0] == "backends":
        return "backends"
    return parts[0]


def main():
    bad = []
    src = os.path.join(ROOT, "src")
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".h", ".cc")) or f.endswith("_test.cc"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            here = folder(rel)
            if here == "cmd" or "/testing/" in rel or f.endswith("_testing.h"):
                continue
            with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                text = fh.read()
            for n, line in enumerate(text.split("\n"), 1):
                m = re.match(r'#include "([^"]+)"', line)
                if not m or not os.path.exists(os.path.join(src, m.group(1))):
                    continue
                there = folder(m.group(1))
                if there != here and there not in ALLOWED.get(here, set()):
                    bad.append(f"src/{rel}:{n}: {here} may not include {m.group(1)} ({there})")
    for dirpath, _, files in os.walk(os.path.join(ROOT, "include")):
        for f in files:
            with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                for n, line in enumerate(fh.read().split("\n"), 1):
                    m = re.match(r'#include "([^"]+)"', line)
                    if m and os.path.exists(os.path.join(src, m.group(1))):
                        bad.append(f"include/dais/{f}:{n}: the public headers may not include "
                                   f"src/{m.group(1)}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
