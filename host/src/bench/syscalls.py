#!/usr/bin/env python3
"""Kernel events per call of the gateway and of the pass-through floor: system calls by name,
page faults, context switches — counted by `perf stat` on the serving process while a fixed
number of non-streamed calls go through it (README, "Benchmark").

Usage:

    python3 host/src/bench/syscalls.py target/release/polygateway                 # all three
    python3 host/src/bench/syscalls.py target/release/polygateway --mode default --calls 8000 \\
        --events page-faults,context-switches

Each mode starts the binary's `mock-upstream` and one server: `passthrough` (the bench's
`bench-passthrough`: axum + reqwest, forwarding bytes), `off` (`serve` with telemetry off and
no limits: `bench`'s "gateway-off") or `default` (`serve` with SQLite telemetry, the memory
limiter with every gate on, the breaker and a static key: `bench`'s default configuration and
`instructions.py`'s). After a warm-up the counters run around `--calls` calls made over
`--clients` keep-alive connections, and each event is printed per call, largest first.

Why: `polygateway bench` reads the servers' user and system CPU time apart; this says what the
system time is made of. The counts are of events, not of their cost: one `pwrite64` of a WAL
frame and one `recvfrom` of a request both count 1. Counting needs `perf` and permission to
attach to the process (root, or `kernel.perf_event_paranoid` ≤ 1).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instructions  # noqa: E402  (free_port, wait_ready, load, BODY, KEY)

# Events perf reports as time; printed in µs per call.
TIME_EVENTS = ("task-clock", "user_time", "system_time", "duration_time")
DEFAULT_EVENTS = "syscalls:sys_enter_*,page-faults,context-switches,cpu-migrations"


def server(exe, mode, up, port, work):
    """Start the server of `mode` on `port`, forwarding to the mock upstream on `up`."""
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
        "PGW_LISTEN": f"127.0.0.1:{port}", "PGW_LOG": "warn", "PGW_MAX_CONNECTIONS": "8192",
        "LLM__OPENAI__1__BASE_URL": f"http://127.0.0.1:{up}/v1",
        "LLM__OPENAI__1__MODEL": "bench-model", "LLM__OPENAI__1__API_KEY": "sk-upstream",
    }
    if mode == "passthrough":
        return subprocess.Popen(
            [exe, "bench-passthrough", "--upstream", f"http://127.0.0.1:{up}",
             "--listen", f"127.0.0.1:{port}"],
            env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if mode == "default":
        # `gateway_env(.., governance: true)` of `bench/mod.rs`; keep the two alike.
        env.update({
            "LLM__OPENAI__1__MAX_CONCURRENCY": "100000", "LLM__OPENAI__1__RPM": "1000000000",
            "LLM__OPENAI__1__TPM": "1000000000000", "LLM__OPENAI__1__EST_TOKENS": "64",
            "LLM__GLOBAL__MAX_CONCURRENCY": "100000", "PGW_API_KEYS": instructions.KEY,
            "PGW_TELEMETRY_SQLITE_PATH": os.path.join(work, "calls.db"),
        })
    else:
        env["PGW_TELEMETRY_BACKEND"] = "none"
    return subprocess.Popen([exe, "serve"], env=env, cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_port(port, proc, seconds):
    """Whether `proc` accepts connections on `port` within `seconds` (the pass-through
    forwards every path, so it has no health endpoint of its own)."""
    end = time.time() + seconds
    while time.time() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def count(exe, mode, calls, clients, events, warmup):
    """`(answered, {event: count})` of `calls` calls through one server of `mode`."""
    work = tempfile.mkdtemp(prefix="pgw-syscalls-")
    up, port = instructions.free_port(), instructions.free_port()
    upstream = subprocess.Popen([exe, "mock-upstream", "--listen", f"127.0.0.1:{up}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv = server(exe, mode, up, port, work)
    try:
        ready = (wait_port if mode == "passthrough" else instructions.wait_ready)(port, srv, 120)
        if not ready:
            sys.exit(f"{mode}: the server did not start")
        instructions.load(port, warmup, instructions.BODY, clients=clients)
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", events, "-p", str(srv.pid)],
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # perf attaches before the counted calls start
        answered = instructions.load(port, calls, instructions.BODY, clients=clients)
        perf.send_signal(2)
        err = perf.communicate()[1]
    finally:
        for p in (srv, upstream):
            p.terminate()
            p.wait()
    counts = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2:
            try:
                value = float(f[0])
            except ValueError:
                continue  # "<not counted>" or "<not supported>"
            # Time events (task-clock in ms, user_time and system_time in ns) in µs.
            scale = {"msec": 1000.0, "ns": 0.001}.get(f[1].strip(), 1.0)
            counts[f[2]] = value * scale
    return answered, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--mode", choices=["passthrough", "off", "default", "all"], default="all")
    ap.add_argument("--calls", type=int, default=8000)
    ap.add_argument("--clients", type=int, default=16, help="keep-alive clients")
    ap.add_argument("--warmup", type=int, default=2000, help="calls before counting starts")
    ap.add_argument("--events", default=DEFAULT_EVENTS, help="perf events, comma-separated")
    args = ap.parse_args()
    exe = os.path.abspath(args.binary)
    modes = ["passthrough", "off", "default"] if args.mode == "all" else [args.mode]
    for mode in modes:
        answered, counts = count(exe, mode, args.calls, args.clients, args.events, args.warmup)
        print(f"{mode}: {answered} of {args.calls} calls answered")
        if answered == 0:
            continue
        for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            if n:
                unit = " µs" if name in TIME_EVENTS else ""
                print(f"  {n / answered:8.3f}{unit} per call  {name.removeprefix('syscalls:sys_enter_')}")


if __name__ == "__main__":
    main()
