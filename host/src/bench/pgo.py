#!/usr/bin/env python3
"""A profile-guided (PGO) build of `polygateway`, and the traffic it is trained on.

    python3 host/src/bench/pgo.py build [--profile dist|release] [--work DIR]
    python3 host/src/bench/pgo.py train BIN [--calls N] [--clients C]

`build` compiles the gateway with LLVM's instrumentation (`-Cprofile-generate`), runs `train`
with that binary, merges the counts with `llvm-profdata` (rustup's `llvm-tools` component)
and compiles again with `-Cprofile-use`, so that the compiler lays out, inlines and orders
the code by how often each branch ran. It prints the optimised binary's path,
`<work>/optimised/<host triple>/<profile>/polygateway` (the instrumented one, not to be
deployed, is under `<work>/instrumented/`). Both compiles use `--target <host>`, so that
build scripts and proc macros are not instrumented, and target directories of their own
under `--work` (default `target/pgo` of the repository; ~3.5 GB each), so the ordinary build
is untouched. They set `RUSTFLAGS` to the PGO flags: flags of your own in `RUSTFLAGS` are not
used. The default profile is `dist` (whole-program LTO: the compiler inlines across crates
with the counts in hand; 21 % fewer instructions per call than the release build against
PGO alone's 14 %, docs/benchmark-history.md, twentieth round); on two CPUs that build took 70
minutes beside other work, and `--profile release` (no LTO) 30-45.

`train` is the workload the counts come from, and it is deliberately not the benchmark's:
a real `serve` (SQLite telemetry on, the default configuration otherwise) in front of the
built-in mock upstream (`mock-upstream`, whose own counts are discarded), driven by
`--clients` keep-alive clients through a fixed mix of what users send — chat completions
plain and streamed with varied conversations, tools and structured output, the Anthropic
Messages and OpenAI Responses dialects, Anthropic and Gemini sources, embeddings, model
lists and the errors of bad requests. Every answer's status is checked against the one the
request must get; any other status fails the run, so a profile is never taken from a
gateway that answered wrongly. The gateway is stopped with SIGTERM, the way an
instrumented process writes its counts.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# The repository: this file is host/src/bench/pgo.py.
REPO = Path(__file__).resolve().parent.parent.parent.parent

WORDS = (
    "the gateway forwards each call to a source chosen by health and cost while the "
    "breaker and the limiter keep a failing or busy upstream from taking more traffic "
    "than it can serve summarise translate explain compare list refactor why how"
).split()


def text(rng, lo, hi):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def conversation(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng, 5, 40)})
    for i in range(rng.choice([1, 1, 1, 3, 5, 9])):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text(rng, 3, 120)})
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": text(rng, 3, 30)})
    return msgs


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
    }
]

SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    },
}


def request(rng):
    """One request of the mix: (label, method, path, headers, body bytes or None, expected status)."""
    json_h = {"content-type": "application/json"}
    r = rng.random()
    model = rng.choice(["llm", "llm", "llm", "claude", "gem"])
    if r < 0.40:
        body = {"model": model, "messages": conversation(rng)}
        if rng.random() < 0.2:
            body["temperature"] = round(rng.random(), 2)
        if rng.random() < 0.2:
            body["max_tokens"] = rng.randint(16, 512)
        return ("chat", "POST", "/v1/chat/completions", json_h, body, 200)
    if r < 0.65:
        body = {
            "model": model,
            "messages": conversation(rng),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return ("chat-stream", "POST", "/v1/chat/completions", json_h, body, 200)
    if r < 0.70:
        body = {"model": "llm", "messages": conversation(rng), "tools": TOOLS, "tool_choice": "auto"}
        return ("chat-tools", "POST", "/v1/chat/completions", json_h, body, 200)
    if r < 0.74:
        body = {"model": "structured", "messages": conversation(rng), "response_format": SCHEMA}
        return ("chat-structured", "POST", "/v1/chat/completions", json_h, body, 200)
    if r < 0.80:
        msgs = [m for m in conversation(rng) if m["role"] != "system"]
        body = {"model": model, "max_tokens": 256, "messages": msgs, "stream": rng.random() < 0.5}
        h = dict(json_h, **{"anthropic-version": "2023-06-01"})
        return ("messages", "POST", "/v1/messages", h, body, 200)
    if r < 0.86:
        body = {"model": model, "input": text(rng, 3, 60), "stream": rng.random() < 0.5}
        if rng.random() < 0.5:
            body["instructions"] = text(rng, 3, 20)
        return ("responses", "POST", "/v1/responses", json_h, body, 200)
    if r < 0.92:
        n = rng.randint(1, 8)
        body = {"model": "llm", "input": [text(rng, 2, 30) for _ in range(n)] if n > 1 else text(rng, 2, 30)}
        return ("embeddings", "POST", "/v1/embeddings", json_h, body, 200)
    if r < 0.94:
        return ("models", "GET", "/v1/models", {}, None, 200)
    if r < 0.96:
        return ("bad-json", "POST", "/v1/chat/completions", json_h, b'{"model": "llm", "messages": [', 400)
    if r < 0.98:
        body = {"model": "no-such-model", "messages": conversation(rng)}
        return ("unknown-model", "POST", "/v1/chat/completions", json_h, body, 404)
    body = {"model": "llm", "messages": []}
    return ("no-messages", "POST", "/v1/chat/completions", json_h, body, 400)


class StartError(Exception):
    pass


def start(cmd, env, cwd, marker, timeout_s=120):
    """Start `cmd` and wait (up to `timeout_s`) for its first stdout line
    `<marker> http://host:port`; the process and the address."""
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    first = []
    reader = threading.Thread(target=lambda: first.append(p.stdout.readline().strip()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = first[0] if first else None
    if line is None or not line.startswith(marker + " http://"):
        p.kill()
        p.wait()
        if line is None:
            what = f"printed no line within {timeout_s} s"
        elif line == "":
            what = "ended its output without a line"
        else:
            what = f"first printed {line!r}"
        raise StartError(
            f"`{cmd[0]} {cmd[1]}` {what}, not `{marker} http://…`: is {cmd[0]} a polygateway build?"
        )
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
    return p, line[len(marker) + 1 :]


def drive(base, calls, clients, seed):
    host_port = base.removeprefix("http://")
    counts, wrong, lock = {}, [], threading.Lock()
    per_client = [calls // clients + (1 if i < calls % clients else 0) for i in range(clients)]

    def client(i, n):
        rng = random.Random(seed * 1000 + i)
        conn = http.client.HTTPConnection(host_port, timeout=60)
        for _ in range(n):
            label, method, path, headers, body, want = request(rng)
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                resp.read()
                status = resp.status
                if resp.getheader("connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException) as e:
                status = f"{type(e).__name__}: {e}"
                conn.close()
                conn = http.client.HTTPConnection(host_port, timeout=60)
            with lock:
                counts[label] = counts.get(label, 0) + 1
                if status != want:
                    wrong.append((label, want, status))
        conn.close()

    threads = [threading.Thread(target=client, args=(i, n)) for i, n in enumerate(per_client)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts, wrong


def train(binary, calls, clients, seed=7):
    binary = Path(binary).resolve()
    if binary.is_dir():
        sys.exit(f"pgo.py: {binary}: a directory, not an executable")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        sys.exit(f"pgo.py: {binary}: no such executable")
    clients = min(clients, calls)
    try:
        run_training(binary, calls, clients, seed)
    except StartError as e:
        sys.exit(f"pgo.py: {e}")


def run_training(binary, calls, clients, seed):
    with tempfile.TemporaryDirectory(prefix="pgo-train-") as tmp:
        # An instrumented binary writes its counts where it was built to (`-Cprofile-generate`);
        # a LLVM_PROFILE_FILE of the caller's is not passed on, so `build` finds them.
        base_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
        # The mock upstream is the same executable: its counts are not the gateway's work.
        mock_env = dict(base_env, LLVM_PROFILE_FILE=os.path.join(tmp, "mock-%p.profraw"))
        # Scenario `json` answers with an object that fits SCHEMA, for the structured calls.
        script = os.path.join(tmp, "scenarios.json")
        with open(script, "w") as f:
            json.dump({"json": {"steps": [], "then": {"content": json.dumps({"answer": "forty-two"})}}}, f)
        mock, mock_url = start(
            [binary, "mock-upstream", "--listen", "127.0.0.1:0", "--script", script],
            mock_env,
            tmp,
            "mock upstream listening on",
        )
        env = dict(
            base_env,
            PGW_LISTEN="127.0.0.1:0",
            PGW_LOG="warn",
            LLM__OPENAI__1__BASE_URL=f"{mock_url}/v1",
            LLM__OPENAI__1__MODEL="gpt-4o-mini",
            LLM__OPENAI__2__BASE_URL=f"{mock_url}/sc/second/v1",
            LLM__OPENAI__2__MODEL="gpt-4o",
            STRUCTURED__OPENAI__1__BASE_URL=f"{mock_url}/sc/json/v1",
            STRUCTURED__OPENAI__1__MODEL="gpt-4o-mini",
            CLAUDE__ANTHROPIC__1__BASE_URL=mock_url,
            CLAUDE__ANTHROPIC__1__MODEL="claude-sonnet-4-5",
            CLAUDE__ANTHROPIC__1__API_KEY="sk-ant-mock",
            GEM__GEMINI__1__BASE_URL=mock_url,
            GEM__GEMINI__1__MODEL="gemini-2.5-flash",
            GEM__GEMINI__1__API_KEY="mock-key",
        )
        gw = None
        try:
            gw, gw_url = start([binary, "serve"], env, tmp, "polygateway listening on")
            t0 = time.monotonic()
            counts, wrong = drive(gw_url, calls, clients, seed)
            took = time.monotonic() - t0
        finally:
            if gw is not None:
                gw.send_signal(signal.SIGTERM)
                try:
                    gw.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    gw.kill()
            mock.send_signal(signal.SIGTERM)
            try:
                mock.wait(timeout=10)
            except subprocess.TimeoutExpired:
                mock.kill()
        mix = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        print(f"pgo.py train: {sum(counts.values())} calls in {took:.1f} s with {clients} clients: {mix}", flush=True)
        if gw.returncode != 0:
            sys.exit(f"pgo.py: `serve` exited with {gw.returncode} after SIGTERM")
        if wrong:
            shown = "; ".join(f"{label}: {got} (want {want})" for label, want, got in wrong[:10])
            sys.exit(f"pgo.py: {len(wrong)} answers with the wrong status: {shown}")


def host_triple():
    out = subprocess.run(["rustc", "-vV"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("host: "):
            return line[len("host: ") :]
    sys.exit("pgo.py: `rustc -vV` names no host")


def llvm_profdata(triple):
    # In the repository, so rustup picks the pinned toolchain (rust-toolchain.toml) the builds
    # use: another toolchain's llvm-profdata may not read its counts.
    sysroot = subprocess.run(
        ["rustc", "--print", "sysroot"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    tool = Path(sysroot) / "lib" / "rustlib" / triple / "bin" / "llvm-profdata"
    if not tool.is_file():
        sys.exit(
            f"pgo.py: {tool} is missing: install it with `rustup component add llvm-tools` "
            "(the llvm-profdata of the compiler's own LLVM version; another version's cannot read its counts)"
        )
    return tool


def cargo_build(profile, triple, target_dir, rustflags):
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir), RUSTFLAGS=rustflags)
    cmd = ["cargo", "build", "--locked", "--profile", profile, "-p", "polygateway", "--target", triple]
    print(f"pgo.py: RUSTFLAGS='{rustflags}' {' '.join(cmd)}", flush=True)
    if subprocess.run(cmd, cwd=REPO, env=env).returncode != 0:
        sys.exit("pgo.py: the build failed (its output is above)")
    return Path(target_dir) / triple / profile / "polygateway"


def build(profile, work, calls, clients):
    triple = host_triple()
    profdata_tool = llvm_profdata(triple)
    work = Path(work).resolve()
    raw = work / "raw"
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True)
    instrumented = cargo_build(profile, triple, work / "instrumented", f"-Cprofile-generate={raw}")
    train(instrumented, calls, clients)
    profiles = sorted(raw.glob("*.profraw"))
    if not profiles:
        sys.exit(f"pgo.py: training wrote no counts into {raw}")
    merged = work / "merged.profdata"
    subprocess.run([profdata_tool, "merge", "-o", merged, *profiles], check=True)
    # A function whose source changed since the counts were taken has none; LLVM warns once
    # per such function, which is noise for a build from one tree.
    optimised = cargo_build(profile, triple, work / "optimised", f"-Cprofile-use={merged} -Cllvm-args=-no-pgo-warn-mismatch")
    print(f"pgo.py: {optimised}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", metavar="{build,train}", required=True)
    b = sub.add_parser(
        "build",
        help="instrument, train, merge, optimise",
        description="Build polygateway profile-guided; print the optimised binary's path "
        "(<work>/optimised/<host triple>/<profile>/polygateway). Needs `rustup component add "
        "llvm-tools`; two builds (with the default dist profile 70 min on two CPUs beside other "
        "work, ~3.5 GB each; release: 30-45 min) and a training run.",
    )
    b.add_argument("--profile", default="dist", choices=["dist", "release"],
                   help="cargo profile: dist (whole-program LTO, the default: the build to deploy) "
                   "or release (no LTO: about half the build time, ~11 %% more instructions per call)")
    b.add_argument("--work", default=str(REPO / "target" / "pgo"),
                   help="target dirs and counts (default: the repository's target/pgo)")
    t = sub.add_parser(
        "train",
        help="run the training mix through BIN serve",
        description="Run BIN mock-upstream and BIN serve and drive the training mix through them; "
        "every answer's status is checked.",
    )
    t.add_argument("binary", metavar="BIN", help="a polygateway executable (instrumented, for build)")
    for p in (b, t):
        p.add_argument("--calls", type=int, default=20000, help="requests of the mix (default 20000)")
        p.add_argument("--clients", type=int, default=16, help="concurrent keep-alive clients (default 16)")
    a = ap.parse_args()
    if a.calls < 1 or a.clients < 1:
        sys.exit("pgo.py: --calls and --clients must be ≥ 1")
    if a.cmd == "train":
        train(a.binary, a.calls, a.clients)
    else:
        build(a.profile, a.work, a.calls, a.clients)


if __name__ == "__main__":
    main()
