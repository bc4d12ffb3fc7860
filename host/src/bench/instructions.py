#!/usr/bin/env python3
"""Instructions per call of the gateway, by component, under callgrind: non-streamed calls,
or with `--stream` streamed ones (the mock upstream's default answer as SSE chunks).

Usage (README, "Benchmark"):

    python3 host/src/bench/instructions.py target/release/polygateway [--requests 3000] [--stream]
        [--chunks 64 [--pace-ms 20]] [--warmup 500] [--clients 4] [--server passthrough]
        [--env KEY=VALUE ...]

Starts the binary's mock upstream and `serve` (the default configuration `polygateway bench`
measures: SQLite telemetry, the memory limiter with every gate on, the breaker, a static
key) under `valgrind --tool=callgrind` with instrumentation off, warms the gateway up with
500 calls, then counts the instructions (`Ir`) of `--requests` calls made by four keep-alive
clients, and prints them per call, split by component (the symbol's crate or file; guest
code compiled by wasmtime has no symbol and is counted as `guest (JIT)`).

Unlike CPU time, an instruction count is the same run after run whatever else the machine
is doing, so a change of a few percent shows; it counts user space only (no syscall, no
network stack, no scheduling) and every instruction alike (a `rep movsb` copy counts one per
byte). Needs valgrind (Debian's package).

Under valgrind the compile child's artifacts do not load (valgrind's emulated CPU lacks some
of the host's features), so `serve` compiles the components in-process for that CPU: the guest
code counted is compiled for valgrind's CPU, not the machine's. Symbols of libc need Debian's
`libc6-dbg` to be named; without it they would be counted as `other`.

`--server passthrough` counts the benchmark's floor instead (`bench-passthrough`: the
gateway's HTTP stack forwarding bytes, no governance), so the instructions the stack costs and
those the gateway's own work costs can be told apart.

`--env KEY=VALUE` (repeatable) adds a setting to the gateway's environment over the default
configuration's, e.g. `--env LLM__OPENAI__1__PLUGIN=plugins/target/wasm32-wasip2/release/openai.wasm`
to count a provider component built elsewhere (another build profile, other target features)
in place of the built-in one.

A run can die under valgrind. One cause is fixed: a guest call that outlasts its slice moves
to a thread that reads its CPU clock, and rustix's vDSO lookup faulted on the auxiliary vector
valgrind gives the process (4 of 9 runs died there, at the first such call); the gateway now
reads that clock through libc (`plugin/schedule.rs`). A run that still dies is started again,
up to `--attempts` times; the counts come from one run that answered every call.
"""

import argparse
import collections
import http.client
import json
import os
import re
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
import time

# First match wins: (component, what the `file:function` line must contain).
RULES = [
    ("guest (JIT)", r"^\?\?\?:0x[0-9a-f]+$"),
    ("SQLite (telemetry writer)", r"sqlite3|rusqlite"),
    ("memcpy / memset", r"__memcpy|__memmove|__memset"),
    ("allocator (jemalloc)", r"jemalloc|_rjem|__rust_alloc|__rust_dealloc|__rust_realloc"),
    ("JSON (serde_json)", r"serde_json|serde_core|/serde-"),
    ("HTTP (hyper, http, httparse, bytes)", r"hyper|httparse|/http-|http::|/bytes-"),
    ("wasm host side (wasmtime)", r"wasmtime|cranelift"),
    ("tokio", r"tokio|/mio-"),
    ("axum, tower", r"axum|tower"),
    ("metrics, hashing", r"prometheus|sip\.rs|hash"),
    ("polygateway", r"polygateway::|host/src/"),
    ("libc", r"^\./|libc|ld-linux|nptl"),
    ("std / core", r"rustc/"),
]

BODY = b'{"model":"llm","messages":[{"role":"user","content":"benchmark question"}]}'
# `--stream`: the same call streamed (the mock upstream's default answer, as SSE chunks).
STREAM_BODY = BODY[:-1] + b',"stream":true}'
KEY = "sk-instructions"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    """Terminate `proc` and wait for it; killed if it has not exited within 60 s."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_ready(port, proc, seconds, any_status=False):
    """Whether `proc` answers `GET /healthz` with 200 (`any_status`: with anything, for the
    floor, which serves only the chat route) within `seconds`."""
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return False
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            c.request("GET", "/healthz")
            if c.getresponse().status == 200 or any_status:
                return True
        except (OSError, http.client.HTTPException):
            pass
        finally:
            c.close()
        time.sleep(0.5)
    return False


def load(port, calls, body, clients=4, events=None):
    """Make `calls` calls of `body` over `clients` keep-alive connections; return how many
    got 200. `events`, a list, gets the number of SSE events of each answer."""
    ok = [0] * clients

    def run(i, n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
        try:
            for _ in range(n):
                c.request("POST", "/v1/chat/completions", body, headers)
                r = c.getresponse()
                answer = r.read()
                ok[i] += r.status == 200
                if events is not None:
                    events.append(answer.count(b"data: "))
        except (OSError, http.client.HTTPException):
            return  # the server went away: the run is reported as incomplete
        finally:
            c.close()

    per = [calls // clients + (i < calls % clients) for i in range(clients)]
    threads = [threading.Thread(target=run, args=(i, n)) for i, n in enumerate(per)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(ok)


def by_component(out_file):
    text = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", out_file],
        check=True, capture_output=True, text=True,
    ).stdout
    total, parts, listing = 0, collections.Counter(), False
    for line in text.splitlines():
        if "PROGRAM TOTALS" in line:
            total = int(line.split()[0].replace(",", ""))
        if "file:function" in line:
            listing = True
            continue
        if listing and line.startswith("---"):
            if parts:
                break
            continue
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[[^\]]*\])?$", line)
        if listing and m:
            # `file:function [object]`: the object (the binary's path, which may well
            # contain "polygateway") is left out of the match.
            n, name = int(m.group(1).replace(",", "")), m.group(2)
            parts[next((c for c, p in RULES if re.search(p, name)), "other")] += n
    return total, parts


def measure(exe, requests, body, chunks=None, pace_ms=0, warmup=500, clients=4,
            server="gateway", extra_env=None):
    """One run: `(answered, its directory, callgrind output file, serve log, SSE events per
    answer)`. `chunks`: the mock's answer is `chunks` words sent as `chunks` content chunks
    (its script's `then`), instead of its default answer; `pace_ms`: that many milliseconds
    between two chunks (the script's `inter_chunk_delay_ms`), so the gateway reads, parses
    and forwards each chunk on its own, as under `bench`'s paced load. `server`: `gateway`
    (`serve`) or `passthrough` (the benchmark's floor, `bench-passthrough`); `extra_env`: settings
    added to the gateway's environment."""
    work = tempfile.mkdtemp(prefix="pgw-instructions-")
    up, gw = free_port(), free_port()
    mock = [exe, "mock-upstream", "--listen", f"127.0.0.1:{up}"]
    if chunks is not None:
        script = os.path.join(work, "script.json")
        with open(script, "w") as f:
            words = " ".join(f"w{i}" for i in range(chunks))
            then = {"content": words, "chunks": chunks, "inter_chunk_delay_ms": pace_ms}
            json.dump({"default": {"steps": [], "then": then}}, f)
        mock += ["--script", script]
    upstream = subprocess.Popen(mock, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The gateway's configuration is `gateway_env(.., governance: true)` of `bench/mod.rs`
    # (what `polygateway bench` calls the default configuration); keep the two alike.
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
        "LLM__OPENAI__1__BASE_URL": f"http://127.0.0.1:{up}/v1",
        "LLM__OPENAI__1__MODEL": "bench-model", "LLM__OPENAI__1__API_KEY": "sk-upstream",
        "LLM__OPENAI__1__MAX_CONCURRENCY": "100000", "LLM__OPENAI__1__RPM": "1000000000",
        "LLM__OPENAI__1__TPM": "1000000000000", "LLM__OPENAI__1__EST_TOKENS": "64",
        "LLM__GLOBAL__MAX_CONCURRENCY": "100000", "PGW_API_KEYS": KEY,
        "PGW_LISTEN": f"127.0.0.1:{gw}", "PGW_LOG": "warn",
        "PGW_TELEMETRY_SQLITE_PATH": os.path.join(work, "calls.db"),
    }
    env.update(extra_env or {})
    out_file = os.path.join(work, "callgrind.out")
    log_path = os.path.join(work, "serve.log")
    answered = 0
    gateway = None
    events = []
    try:
        with open(log_path, "w") as log:
            command = [exe, "serve"]
            if server == "passthrough":
                command = [exe, "bench-passthrough", "--upstream", f"http://127.0.0.1:{up}",
                           "--listen", f"127.0.0.1:{gw}"]
            gateway = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
                 f"--callgrind-out-file={out_file}", *command],
                env=env, cwd=work, stdout=log, stderr=log,
            )
            if wait_ready(gw, gateway, 300, any_status=server == "passthrough"):
                load(gw, warmup, body, clients=clients, events=events)
                subprocess.run(["callgrind_control", "-i", "on", str(gateway.pid)],
                               check=True, capture_output=True)
                answered = load(gw, requests, body, clients=clients)
                subprocess.run(["callgrind_control", "-i", "off", str(gateway.pid)],
                               check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"run failed: {e}", file=sys.stderr)
        answered = 0
    finally:
        for proc in (gateway, upstream):
            if proc is not None:
                stop(proc)
    return answered, work, out_file, log_path, sorted(set(events))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--attempts", type=int, default=5)
    ap.add_argument("--stream", action="store_true",
                    help="streamed calls instead of non-streamed ones")
    ap.add_argument("--chunks", type=int, default=None,
                    help="the mock's answer as this many content chunks (default: its own)")
    ap.add_argument("--pace-ms", type=int, default=0,
                    help="milliseconds between two of the mock's chunks (needs --chunks)")
    ap.add_argument("--warmup", type=int, default=500, help="calls before counting starts")
    ap.add_argument("--clients", type=int, default=4, help="keep-alive clients")
    ap.add_argument("--server", choices=["gateway", "passthrough"], default="gateway",
                    help="what is counted: the gateway (`serve`) or the benchmark's floor")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting added to the gateway's environment (repeatable)")
    args = ap.parse_args()
    extra_env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            sys.exit(f"--env {item!r}: expected KEY=VALUE")
        extra_env[key] = value
    if args.pace_ms and args.chunks is None:
        sys.exit("--pace-ms needs --chunks")
    body, kind = (STREAM_BODY, "streamed") if args.stream else (BODY, "non-streamed")
    exe = os.path.abspath(args.binary)
    n = args.requests
    for attempt in range(1, args.attempts + 1):
        answered, work, out_file, log_path, events = measure(
            exe, n, body, args.chunks, args.pace_ms, args.warmup, args.clients, args.server,
            extra_env)
        if answered == n:
            break
        with open(log_path, errors="replace") as log:
            why = next((ln.strip() for ln in log if "SIGSEGV" in ln or "ERROR" in ln), "")
        print(f"run {attempt}: {answered} of {n} calls answered {why}", file=sys.stderr)
        if attempt < args.attempts:
            shutil.rmtree(work, ignore_errors=True)
    else:
        sys.exit("no run answered every call")
    total, parts = by_component(out_file)
    shape = f"; SSE events per answer: {', '.join(map(str, events))}" if args.stream else ""
    what = "" if args.server == "gateway" else f" through the {args.server}"
    print(f"{total / n:,.0f} instructions per {kind} call{what} ({n} calls{shape}; {out_file})")
    print("| component | instructions per call | share |")
    print("|---|---|---|")
    for c, v in parts.most_common():
        print(f"| {c} | {v / n:,.0f} | {100 * v / total:.1f} % |")


if __name__ == "__main__":
    main()
