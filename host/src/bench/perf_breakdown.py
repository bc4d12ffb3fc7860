#!/usr/bin/env python3
"""Per-component CPU breakdown of one process from a `perf record` profile.

Usage (README, "Benchmark"):

    perf record -F 1999 -p <gateway pid> -o perf.data -- sleep 5
    python3 host/src/bench/perf_breakdown.py perf.data [CPU µs per call]

Reads `perf report --no-children -F period,dso,sym` (self samples: where the CPU was, not
who called it) and sums each symbol's sampled period into the gateway's components by the
symbol's crate or module path. Periods, not the percentages `perf report` prints: those are
rounded to two decimals per symbol, and guest code without a perf map is thousands of
addresses of a few samples each, most of them printed as 0.00 % — summing the rounded
figures counted the guest at 1.8 % of a profile whose `--sort dso` gave its JIT code 4.6 %.

Attach once the gateway has started its threads (a second after start): `perf record -p`
follows the threads that exist when it attaches, and the SQLite writer's starts after the
runtime's. With the CPU per call from `polygateway bench` (its "CPU µs/req" column for the
same load), each share is also given in µs per call. A symbol no rule names counts as
"other", so the table always adds up to 100 %.
"""

import re
import subprocess
import sys

# First match wins: (component, what the symbol or its DSO must contain).
RULES = [
    ("kernel (syscalls, TCP, scheduling)", re.compile(r"^\[kernel")),
    ("guest wasm code (JIT, [unknown] frames)", re.compile(r"^\S*(jitted|\[unknown\]|perf-\d+\.map)|^\[JIT\]")),
    ("allocator (jemalloc)", re.compile(r"_rjem_|jemalloc|je_|\bmalloc\b|\bfree\b|rallocx|__rust_(alloc|dealloc|realloc|no_alloc)")),
    ("URL parsing (url, idna)", re.compile(r"\burl::|\bidna::")),
    ("tracing (spans, instrumented futures)", re.compile(r"\btracing::|tracing_core|tracing_subscriber|opentelemetry")),
    ("wasm host side (wasmtime: lift/lower, stores, calls)", re.compile(r"wasmtime|cranelift|wasmparser")),
    ("plugin calls (host/src/plugin)", re.compile(r"polygateway::plugin::")),
    ("HTTP server (hyper server, axum, proxy/)", re.compile(r"hyper::proto::h1::role::Server|hyper::server|axum|polygateway::proxy::")),
    ("HTTP client (reqwest, hyper client, transport/)", re.compile(r"reqwest|hyper_util::client|hyper::client|polygateway::transport::")),
    ("HTTP shared (hyper codec, http, httparse, bytes)", re.compile(r"hyper::|httparse|\bhttp::|bytes::")),
    ("tokio runtime", re.compile(r"tokio::|mio::")),
    ("governance (breaker, limiter, admission)", re.compile(r"polygateway::governance::|polygateway::pipeline::admission")),
    ("telemetry (rows, metrics, SQLite writer)", re.compile(r"polygateway::telemetry::|polygateway::pipeline::rows|rusqlite|sqlite3|prometheus_client")),
    ("pipeline (retry loop, attempt, sink, stack)", re.compile(r"polygateway::pipeline::")),
    ("JSON (serde_json)", re.compile(r"serde_json|serde::")),
    ("libc (memcpy, syscalls wrappers)", re.compile(r"^libc|libc\.so|__memmove|__memcpy|__memset|__libc")),
    ("std / core", re.compile(r"\bstd::|\bcore::|alloc::")),
]


def report(path):
    out = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "-g", "none", "-F", "period,dso,sym",
         "--stdio", "--percent-limit", "0", "-q"],
        check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        # `  812906250  libc.so.6  [.] sym`; a JIT DSO has spaces: `[JIT] tid 19697`.
        m = re.match(r"\s*(\d+)\s+(\[JIT\] tid \d+|\S+)\s+\[[.kHgu]\]\s+(.*)$", line)
        if m:
            yield int(m.group(1)), m.group(2), m.group(3).strip()


def classify(dso, sym):
    text = f"{dso} {sym}"
    if dso.startswith("[kernel"):
        return RULES[0][0]
    if sym.startswith("0x") or dso == "[unknown]" or dso.startswith(("[JIT]", "perf-")):
        return RULES[1][0]
    for name, rule in RULES[2:]:
        if rule.search(text):
            return name
    return "other"


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: perf_breakdown.py perf.data [CPU µs per call]")
    per_call = float(sys.argv[2]) if len(sys.argv) > 2 else None
    totals = {}
    for period, dso, sym in report(sys.argv[1]):
        key = classify(dso, sym)
        totals[key] = totals.get(key, 0) + period
    whole = sum(totals.values()) or 1
    print("| component | share of sampled CPU time |" + (" µs per call |" if per_call else ""))
    print("|---|---|" + ("---|" if per_call else ""))
    for name, period in sorted(totals.items(), key=lambda kv: -kv[1]):
        share = period / whole
        row = f"| {name} | {share * 100:.1f} % |"
        if per_call:
            row += f" {share * per_call:.1f} |"
        print(row)


if __name__ == "__main__":
    main()
