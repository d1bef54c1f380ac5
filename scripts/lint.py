#!/usr/bin/env python3
"""The house rules that a formatter does not check (CONTRIBUTING.md), read from the tree and from
`swift package dump-package`. Each broken rule is one line naming the file and the fix; the exit
status is 1 if any."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 400
# The C modules, each imported only by its edge module, as `internal import`.
C_EDGES = {"CHiredis": "RedisClient", "CHiredisIO": "RedisClient", "CNghttp2": "HTTP2", "COpenSSL": "TLS",
           "CLinux": "IOLoop", "CBuildInfo": "Telemetry"}
# The modules that may import Foundation (what ships uses FoundationEssentials).
FOUNDATION_OK = {"APNSMock", "TestSupport", "apns-mock", "apns-render-bench"}
UNSAFE_OK = {"PointerTricks"}
SYSTEM = {"Foundation", "FoundationEssentials", "Glibc", "Dispatch", "Synchronization", "XCTest", "PackageDescription",
          "_Concurrency", "Swift"}
# The queue knows nothing of a provider, a provider nothing of Redis or the worker's settings
# (docs/architecture.md): modules each of these must never reach, directly or not.
NEVER_REACHES = {
    "Delivery": {"QueueContract", "RedisClient", "Configuration", "HTTP2", "TLS", "IOLoop"},
    "APNSTransport": {"QueueContract", "RedisClient", "CHiredis", "Configuration", "APNSWorker", "FCMTransport"},
    "FCMTransport": {"QueueContract", "RedisClient", "CHiredis", "Configuration", "APNSWorker", "APNSTransport"},
    "QueueContract": {"APNSTransport", "FCMTransport", "HTTP2", "Configuration"},
}
IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(public|package|internal|fileprivate|private)\s+)?import\s+(?:\w+\s+)?([\w.]+)")


def targets():
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    found = {}
    for t in dump["targets"]:
        if t["type"] == "system-target":
            continue
        deps = set()
        for d in t.get("dependencies", []):
            for kind in ("byName", "target", "product"):
                if kind in d:
                    deps.add(d[kind][0])
        path = t.get("path") or os.path.join("Tests" if t["type"] == "test" else "Sources", t["name"])
        found[t["name"]] = (path, deps)
    return found


def reached(found, name):
    seen, todo = set(), [name]
    while todo:
        for d in found.get(todo.pop(), ("", set()))[1]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def main():
    problems = []
    found = targets()
    for name, never in sorted(NEVER_REACHES.items()):
        for bad in sorted(reached(found, name) & never):
            problems.append("Package.swift: %s reaches %s; keep it below the seam (docs/architecture.md)" % (name, bad))
    for name, (path, deps) in sorted(found.items()):
        for folder, _, files in os.walk(os.path.join(ROOT, path)):
            for f in sorted(files):
                if not f.endswith(".swift"):
                    continue
                full = os.path.join(folder, f)
                rel = os.path.relpath(full, ROOT)
                lines = open(full, encoding="utf-8").read().split("\n")
                if len(lines) - 1 > MAX_LINES:
                    problems.append("%s: %d lines; split it (at most %d)" % (rel, len(lines) - 1, MAX_LINES))
                quoted = False  # inside a multi-line string (a script in another language)
                for n, line in enumerate(lines, 1):
                    was_quoted = quoted
                    quoted ^= line.count('"""') % 2 == 1
                    if was_quoted:
                        continue
                    code = line.split("//")[0]
                    if name not in UNSAFE_OK and re.search(r"\bUnmanaged\b|unowned\(unsafe\)", code):
                        problems.append("%s:%d: Unmanaged and unowned(unsafe) live in PointerTricks: use its helpers" % (rel, n))
                    m = IMPORT.match(line)
                    if not m:
                        continue
                    level, module = m.group(1), m.group(2).split(".")[0]
                    if module in SYSTEM:
                        if module == "Foundation" and name not in FOUNDATION_OK and not path.startswith("Tests"):
                            problems.append("%s:%d: what ships imports FoundationEssentials, not Foundation" % (rel, n))
                        continue
                    if module not in deps:
                        problems.append("%s:%d: imports %s, which target %s does not declare in Package.swift" % (rel, n, module, name))
                    if module in C_EDGES and not path.startswith("Tests"):
                        if C_EDGES[module] != name:
                            problems.append("%s:%d: %s is imported only by %s (its edge); go through it" % (rel, n, module, C_EDGES[module]))
                        elif level != "internal":
                            problems.append("%s:%d: write `internal import %s`: the C library stays behind its edge" % (rel, n, module))
    for p in problems:
        print(p)
    print("scripts/lint: %s" % ("%d problem(s)" % len(problems) if problems else "the house rules hold"), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
