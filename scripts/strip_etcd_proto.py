#!/usr/bin/python3
"""Copies one of etcd's .proto files (Debian's golang-etcd-server-dev) without its Go-only
annotations, so that protoc generates C++ from it with nothing else installed: the gogoproto and
google.api imports, `option (gogoproto.*)` lines, `[(gogoproto.*) = ...]` field options and the
`option (google.api.http) = {...};` blocks. Imports of other etcd files are rewritten to the
layout of the output folder (etcd/mvcc/mvccpb/kv.proto -> mvccpb/kv.proto). The messages,
fields and field numbers are untouched: the wire format is etcd's.

usage: strip_etcd_proto.py IN.proto OUT.proto
"""
import re
import sys


def strip(text: str) -> str:
    text = re.sub(r'import "(gogoproto/gogo|google/api/annotations)\.proto";\n', "", text)
    text = re.sub(r'import "etcd/(?:[a-z0-9]+/)*([a-z0-9]+pb/[a-z0-9_]+\.proto)";',
                  r'import "\1";', text)
    text = re.sub(r"option \(gogoproto\.[a-z_]+\) = [a-z]+;\n", "", text)
    text = re.sub(r"\s*\[\(gogoproto\.[a-z_]+\)\s*=\s*[^\]]*\]", "", text)
    # option (google.api.http) = { post: "..." body: "*" additional_bindings { ... } };
    # (nested braces, several lines). A method left with `{ }` is still valid proto.
    marker = "option (google.api.http) = {"
    while (start := text.find(marker)) >= 0:
        depth, i = 1, start + len(marker)
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        end = text.index(";", i) + 1
        text = text[:start] + text[end:]
    return text


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        out = strip(f.read())
    if "gogoproto" in out or "google.api" in out:
        sys.exit(f"{src}: annotations left after stripping")
    with open(dst, "w") as f:
        f.write(out)


if __name__ == "__main__":
    main()
