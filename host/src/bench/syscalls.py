#!/usr/bin/env python3
"""Kernel events per call of the gateway and of the pass-through floor: system calls by name,
page faults, context switches, and CPU time (`task-clock`) — counted by `perf stat` on the
serving process while a fixed number of non-streamed calls go through it (README,
"Benchmark").

Usage:

    python3 host/src/bench/syscalls.py target/release/polygateway                 # all three
    python3 host/src/bench/syscalls.py target/release/polygateway --mode default --calls 8000 \\
        --events page-faults,context-switches,task-clock

Each mode starts the binary's `mock-upstream` and one server: `passthrough` (the bench's
`bench-passthrough`: the gateway's own server and upstream client forwarding bytes, since the
sixteenth round; axum + reqwest before it), `off` (`serve` with telemetry off and
no limits: `bench`'s "gateway-off", `gateway_env(.., false)` in `bench/mod.rs`) or `default`
(`serve` with SQLite telemetry, the memory limiter with every gate on, the breaker and a
static key: `gateway_env(.., true)`, as `instructions.py` runs it; unlike `bench` it sets no
pricing file, so its rows are unpriced). As in `bench`, `TOKIO_WORKER_THREADS`, `MALLOC_CONF`,
`_RJEM_MALLOC_CONF`, `PGW_PLUGIN_*` and `OTEL_*` reach the server from this environment.
After a warm-up the counters are enabled for exactly the `--calls` calls made over `--clients`
keep-alive connections (perf's control FIFO), and each event is printed per call, largest
first; time events (perf reports them in ms or ns) in µs per call.

Why: `polygateway bench` reads the servers' user and system CPU time apart; this says what the
system time is made of. The counts are of events, not of their cost: one `pwrite64` of a WAL
frame and one `recvfrom` of a request both count 1. Counting needs `perf` and permission to
attach to the process and to read the `syscalls:*` tracepoints (root, or
`kernel.perf_event_paranoid` ≤ 1 and read access to tracefs).
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import instructions  # noqa: E402  (free_port, wait_ready, load, stop, BODY, KEY)

DEFAULT_EVENTS = "syscalls:sys_enter_*,page-faults,context-switches,cpu-migrations"
# perf's units of time events, to µs.
TIME_UNITS = {"msec": 1000.0, "ns": 0.001}
# Variables `bench` passes to the servers it starts (`bench/process.rs`).
PASSED = ("TOKIO_WORKER_THREADS", "MALLOC_CONF", "_RJEM_MALLOC_CONF")
PASSED_PREFIXES = ("PGW_PLUGIN_", "OTEL_")


def server(exe, mode, up, port, work, log):
    """Start the server of `mode` on `port`, forwarding to the mock upstream on `up`; its
    output goes to `log`."""
    env = {k: v for k, v in os.environ.items() if k in PASSED or k.startswith(PASSED_PREFIXES)}
    env.update({
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
        "PGW_LISTEN": f"127.0.0.1:{port}", "PGW_LOG": "warn", "PGW_MAX_CONNECTIONS": "8192",
        "LLM__OPENAI__1__BASE_URL": f"http://127.0.0.1:{up}/v1",
        "LLM__OPENAI__1__MODEL": "bench-model", "LLM__OPENAI__1__API_KEY": "sk-upstream",
    })
    if mode == "passthrough":
        return subprocess.Popen(
            [exe, "bench-passthrough", "--upstream", f"http://127.0.0.1:{up}",
             "--listen", f"127.0.0.1:{port}"],
            env=env, cwd=work, stdout=log, stderr=log)
    if mode == "default":
        env.update({
            "LLM__OPENAI__1__MAX_CONCURRENCY": "100000", "LLM__OPENAI__1__RPM": "1000000000",
            "LLM__OPENAI__1__TPM": "1000000000000", "LLM__OPENAI__1__EST_TOKENS": "64",
            "LLM__GLOBAL__MAX_CONCURRENCY": "100000", "PGW_API_KEYS": instructions.KEY,
            "PGW_TELEMETRY_SQLITE_PATH": os.path.join(work, "calls.db"),
        })
    else:
        env["PGW_TELEMETRY_BACKEND"] = "none"
    return subprocess.Popen([exe, "serve"], env=env, cwd=work, stdout=log, stderr=log)


def wait_port(port, proc, seconds):
    """Whether `proc` accepts connections on `port` within `seconds` (the pass-through and
    the mock upstream have no `/healthz`: the pass-through serves only
    `POST /v1/chat/completions`)."""
    end = time.time() + seconds
    while time.time() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Perf:
    """`perf stat` attached to `pid`, started disabled and switched on and off through its
    control FIFO, so the counts cover the measured calls only (not the warm-up's tail, nor
    the epoch ticker's last ticks after the load)."""

    def __init__(self, pid, events, work):
        self.ctl, self.ack = os.path.join(work, "perf.ctl"), os.path.join(work, "perf.ack")
        os.mkfifo(self.ctl)
        os.mkfifo(self.ack)
        self.proc = subprocess.Popen(
            ["perf", "stat", "-x,", "-e", events, "-D", "-1",
             "--control", f"fifo:{self.ctl},{self.ack}", "-p", str(pid)],
            stderr=subprocess.PIPE, text=True)
        # Opening a FIFO blocks until perf has opened its end; perf failing first would
        # leave it blocked, so each open waits on a thread-free poll of perf's exit.
        self.ctl_f = self._open(self.ctl, os.O_WRONLY)
        self.ack_f = self._open(self.ack, os.O_RDONLY)

    def _open(self, path, flags):
        end = time.time() + 30
        while time.time() < end:
            if self.proc.poll() is not None:
                sys.exit(f"perf stat failed:\n{self.proc.stderr.read()}")
            try:
                return os.open(path, flags | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)  # ENXIO: perf has not opened its reading end yet
        sys.exit("perf stat did not open its control FIFO within 30 s")

    def command(self, cmd):
        os.write(self.ctl_f, f"{cmd}\n".encode())
        end = time.time() + 30
        while time.time() < end:
            try:
                if os.read(self.ack_f, 16):
                    return
            except BlockingIOError:
                pass
            if self.proc.poll() is not None:
                sys.exit(f"perf stat failed:\n{self.proc.stderr.read()}")
            time.sleep(0.01)
        sys.exit(f"perf stat did not acknowledge `{cmd}`")

    def finish(self):
        """`{event: (value, unit)}` once perf has stopped."""
        self.proc.send_signal(2)
        err = self.proc.communicate(timeout=60)[1]
        os.close(self.ctl_f)
        os.close(self.ack_f)
        counts = {}
        for line in err.splitlines():
            f = line.split(",")
            if len(f) > 2:
                try:
                    counts[f[2]] = (float(f[0]), f[1].strip())
                except ValueError:
                    continue  # "<not counted>" or "<not supported>"
        if not counts:
            sys.exit(f"perf stat printed no counts:\n{err}")
        return counts


def count(exe, mode, calls, clients, events, warmup):
    """`(answered, {event: (value, unit)})` of `calls` calls through one server of `mode`."""
    work = tempfile.mkdtemp(prefix="pgw-syscalls-")
    up, port = instructions.free_port(), instructions.free_port()
    log_path = os.path.join(work, "server.log")
    procs = []
    try:
        with open(log_path, "w") as log:
            upstream = subprocess.Popen([exe, "mock-upstream", "--listen", f"127.0.0.1:{up}"],
                                        stdout=log, stderr=log)
            procs.append(upstream)
            if not wait_port(up, upstream, 60):
                sys.exit(f"the mock upstream did not start:\n{tail(log_path)}")
            srv = server(exe, mode, up, port, work, log)
            procs.append(srv)
            wait = wait_port if mode == "passthrough" else instructions.wait_ready
            if not wait(port, srv, 120):
                sys.exit(f"{mode}: the server did not start:\n{tail(log_path)}")
            instructions.load(port, warmup, instructions.BODY, clients=clients)
            perf = Perf(srv.pid, events, work)
            perf.command("enable")
            answered = instructions.load(port, calls, instructions.BODY, clients=clients)
            perf.command("disable")
            return answered, perf.finish()
    finally:
        for p in reversed(procs):
            instructions.stop(p)
        shutil.rmtree(work, ignore_errors=True)


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
        per_call = []
        for name, (value, unit) in counts.items():
            if unit in TIME_UNITS:
                per_call.append((value * TIME_UNITS[unit] / answered, " µs", name))
            elif value:
                per_call.append((value / answered, "", name))
        for v, unit, name in sorted(per_call, key=lambda x: -x[0]):
            print(f"  {v:8.3f}{unit} per call  {name.removeprefix('syscalls:sys_enter_')}")


if __name__ == "__main__":
    main()
