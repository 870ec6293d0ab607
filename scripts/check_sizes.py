#!/usr/bin/python3
"""Checks the size limits of docs/architecture.md ("Code size"): no function in src/ (tests
aside) longer than 100 lines, no source file longer than 800 lines.

A function is found the way clang-format lays it out: a line at column 0 (namespaces are not
indented) that opens a body with '{' and is not a type, namespace or enum, up to the matching '}'
at column 0. Prints each one over the limit and exits 1 if any is.

usage: scripts/check_sizes.py [--max-function 100] [--max-file 800] [--top N]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_FUNCTION = re.compile(r"^(namespace|class|struct|enum|union|extern|template\s*<[^>]*>\s*(class|struct))\b")


def is_test(path):
    base = os.path.basename(path)
    return (base.endswith("_test.cc") or "/testing/" in path or base.endswith("_testing.h")
            or "/fuzz/" in path)


def member_functions(lines):
    """Yields (name line, first line number, length) of each function defined inside a class body
    (indented two spaces, as clang-format lays out a top-level class's members)."""
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   ") and "(" in line and \
                line.rstrip().endswith("{") and not line.lstrip().startswith(("//", "if ", "for ", "while ", "switch ", "}", "case ", "return ", "struct ", "class ", "namespace ", "enum ")):
            j = i + 1
            while j < len(lines) and not (lines[j].startswith("  }") and not lines[j].startswith("   ")):
                j += 1
            yield line.strip(), i + 1, j - i + 1


def functions(lines):
    """Yields (name line, first line number, length) of each column-0 function body."""
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if line and not line[0].isspace() and line.rstrip().endswith("{") and \
                not NOT_FUNCTION.match(line) and not line.startswith("#") and \
                not line.startswith("//"):
            # The signature may start on earlier lines (wrapped parameters).
            start = i
            while start > 0 and lines[start - 1] and lines[start - 1][0].isspace() is False and \
                    not lines[start - 1].rstrip().endswith((";", "}", "{")) and \
                    not lines[start - 1].startswith(("//", "#")):
                start -= 1
            j = i + 1
            while j < n and not lines[j].startswith("}"):
                j += 1
            yield lines[start].strip(), start + 1, j - start + 1
            i = j + 1
        else:
            i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-function", type=int, default=100)
    ap.add_argument("--max-file", type=int, default=800)
    ap.add_argument("--top", type=int, default=0, help="also list the N longest functions")
    args = ap.parse_args()
    bad = []
    all_fns = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in sorted(files):
            if not f.endswith((".cc", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            if is_test(rel):
                continue
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) > args.max_file:
                bad.append(f"{rel}: {len(lines)} lines (file limit {args.max_file})")
            for sig, first, length in list(functions(lines)) + list(member_functions(lines)):
                all_fns.append((length, f"{rel}:{first}", sig))
                if length > args.max_function:
                    bad.append(f"{rel}:{first}: {length} lines (function limit "
                               f"{args.max_function}): {sig[:80]}")
    for length, where, sig in sorted(all_fns, reverse=True)[:args.top]:
        print(f"{length:5d}  {where}  {sig[:70]}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
