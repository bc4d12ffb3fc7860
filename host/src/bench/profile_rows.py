#!/usr/bin/env python3
"""Side-by-side CPU profiles of the servers `polygateway bench` measures — nginx, the
pass-through floor, the gateway with everything off and the default gateway — from one run
under one system-wide profiler, in µs of CPU per call (README, "Benchmark").

Usage:

    python3 host/src/bench/profile_rows.py target/release/polygateway --duration-s 6   # run, report
    python3 host/src/bench/profile_rows.py target/release/polygateway --out DIR --top 40 \\
        --only non-stream --concurrency 128 --duration-s 6
    python3 host/src/bench/profile_rows.py --report DIR1 DIR2 DIR3    # report again: medians
    python3 host/src/bench/profile_rows.py target/release/polygateway --call-graph --out DIR
    python3 host/src/bench/profile_rows.py --report DIR --callers _raw_spin_unlock_irqrestore \\
        [--depth 3] [--top 8]
    python3 host/src/bench/profile_rows.py target/release/polygateway --server-bin PGO_BIN \\
        --out DIR    # the floor and the gateways of another build (pgo.py build's), nginx beside

It runs `perf record -a -k CLOCK_MONOTONIC -e cpu-clock` around `BIN bench --only ONLY
--concurrency C --out DIR/bench.json`. Each row of that JSON names its serving process
(`pid`) and when its load ran (`window_monotonic_s`, the clock perf stamps samples with), so
a row's samples are exactly its process's samples inside its window. A `cpu-clock` sample
carries its period in ns of CPU time: summed over a row and divided by the row's requests,
that is CPU µs per call, which this prints next to `bench`'s own figure from `/proc` (the two
differ by a few per cent). A sample whose location `perf script` printed in a form this does
not read is counted as `[unparsed]`, so the totals keep every sample.

Printed per server: CPU per call, its kernel part, the components of `perf_breakdown.py`, and
the symbols with the most CPU per call across the servers, kernel and user space apart. Given
several runs (`--report DIR1 DIR2 DIR3`), each figure is the median of the runs' figures.
Recorded with `--call-graph` (kernel call chains: `perf record -g`; user-space chains are not
usable, the binary has no frame pointers), `--callers SYMBOL` prints instead who called one
function in each server, in µs per call: which work, on whose behalf, a kernel symbol's time
is (from the first directory given; data without call chains is refused).

Why: profiles of one server at a time, in different runs, compare figures taken under
different loads of a VM whose speed drifts; here every server is measured in the same run,
so a difference between two columns is the servers', not the machine's. Needs `perf` and
permission to profile every CPU (root, or `kernel.perf_event_paranoid` ≤ 0).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf_breakdown  # noqa: E402  (classify: the components)

# The servers compared, in column order, as `bench` names their rows' paths.
PATHS = ("nginx", "passthrough", "gateway-off", "gateway")
# `perf script -F pid,time,period,ip,sym,dso`: a sample's line, and with call chains
# (`--call-graph`) its frames on the lines after it, innermost first:
# `  24293  1896.517340:     333444      5581910b2ba0 http::request::Parts::new (/x/polygateway)`
# `  24293  1896.517340:     333444 ` + `\tffffffff816b38c2 tcp_ack ([kernel.kallsyms])` …
# A symbol may hold spaces and parentheses; the DSO is the last parenthesised field.
HEAD = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+(\d+)\s*(.*)$")
FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$")


def record(exe, out, only, concurrency, duration_s, call_graph, server_bin=None):
    """Run `bench` under a system-wide `perf record` into `out` (with kernel call chains if
    `call_graph`; with the servers started from `server_bin` if given)."""
    os.makedirs(out, exist_ok=True)
    cmd = ["perf", "record", "-a", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock",
           "-F", "2999", *(["-g"] if call_graph else []),
           "-o", os.path.join(out, "perf.data"), "--",
           exe, "bench", "--only", only, "--concurrency", str(concurrency),
           "--duration-s", str(duration_s), "--out", os.path.join(out, "bench.json"),
           *(["--server-bin", server_bin] if server_bin else [])]
    with open(os.path.join(out, "bench.txt"), "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed ({done.returncode}); see {out}/bench.txt")


def rows_of(bench, mode, concurrency):
    """`{path: row}` of the compared servers' rows of `mode` at `concurrency`."""
    rows = {}
    for r in bench["rows"]:
        if (r["mode"] == mode and r["concurrency"] == concurrency and r["path"] in PATHS
                and r.get("pid") and r.get("window_monotonic_s")):
            rows[r["path"]] = r
    if not rows:
        held = sorted({(r["mode"], r["concurrency"]) for r in bench["rows"]
                       if r.get("pid") and r.get("window_monotonic_s")})
        if held:
            sys.exit(f"no {mode} rows at concurrency {concurrency}; this run holds "
                     + ", ".join(f"{m} at concurrency {c}" for m, c in held)
                     + " (give --only and --concurrency to match)")
        sys.exit("no row of this run names its process and window: its bench.json is from "
                 "a bench built before `pid` and `window_monotonic_s` were recorded")
    return {p: rows[p] for p in PATHS if p in rows}


def load_rows(out, mode, concurrency):
    """`rows_of` the run in directory `out`."""
    with open(os.path.join(out, "bench.json")) as f:
        return rows_of(json.load(f), mode, concurrency)


def check_dirs(outs):
    """Exit naming what is missing unless every directory holds a run's `bench.json` and
    `perf.data` (the results files in `host/src/bench/results/` keep only the former)."""
    for out in outs:
        missing = [f for f in ("bench.json", "perf.data")
                   if not os.path.isfile(os.path.join(out, f))]
        if missing:
            sys.exit(f"{out}: not a directory of a profile_rows.py run (no "
                     f"{' and no '.join(missing)}; give the --out directory of a run)")


def samples(data, rows, callers=None, depth=3):
    """`{path: {(dso, symbol): ns}}`: each row's process's samples inside its window. With
    `callers` (a symbol), `{path: {"caller <- its caller …": ns}}` instead: the samples in
    that symbol, by the `depth` frames that called it (the data needs call chains)."""
    by_pid = {r["pid"]: (path, r["window_monotonic_s"]) for path, r in rows.items()}
    out = {path: {} for path in rows}
    err = tempfile.TemporaryFile(mode="w+")
    script = subprocess.Popen(
        ["perf", "script", "-i", data, "-F", "pid,time,period,ip,sym,dso"],
        stdout=subprocess.PIPE, stderr=err, text=True, errors="replace")

    def take(sample):
        path, ns, frames = sample
        if not frames:
            frames = [("?", "[unparsed]")]
        if callers is None:
            dso, sym = frames[0]
            key = (os.path.basename(dso), sym or "[unknown]")
        elif frames[0][1] == callers:
            key = " <- ".join(sym for _, sym in frames[1:depth + 1]) or "(no call chain)"
        else:
            return
        out[path][key] = out[path].get(key, 0) + ns

    sample = None
    for line in script.stdout:
        head = HEAD.match(line) if not line.startswith("\t") else None
        if head:
            if sample:
                take(sample)
            sample = None
            if int(head.group(1)) in by_pid:
                path, (start, end) = by_pid[int(head.group(1))]
                if start <= float(head.group(2)) <= end:
                    sample = (path, int(head.group(3)), [])
                    frame = FRAME.match(head.group(4))
                    if frame:
                        sample[2].append((frame.group(2), frame.group(1)))
        elif sample:
            frame = FRAME.match(line)
            if frame:
                sample[2].append((frame.group(2), frame.group(1)))
    if sample:
        take(sample)
    if script.wait() != 0:
        err.seek(0)
        sys.exit(f"perf script -i {data} failed:\n{err.read()[-2000:]}")
    return out


def per_call(ns, row):
    return ns / 1000 / max(row["stats"]["requests"], 1)


def tables(out, mode, concurrency):
    """One run's figures: `{table: {row name: {server: µs per call}}}`."""
    rows = load_rows(out, mode, concurrency)
    profile = samples(os.path.join(out, "perf.data"), rows)
    t = {"cpu": {}, "components": {}, "kernel": {}, "user space": {}}

    def add(table, name, server, ns):
        cell = t[table].setdefault(name, {})
        cell[server] = cell.get(server, 0) + per_call(ns, rows[server])

    for server, row in rows.items():
        t["cpu"].setdefault("bench (/proc)", {})[server] = (row["cpu_s_per_1k"] or 0) * 1000
        for name in ("profile", "of it kernel", "of it user space"):
            t["cpu"].setdefault(name, {})[server] = 0
        for (dso, sym), ns in profile[server].items():
            in_kernel = dso.startswith("[kernel")
            add("cpu", "profile", server, ns)
            add("cpu", "of it kernel" if in_kernel else "of it user space", server, ns)
            add("components", perf_breakdown.classify(dso, sym), server, ns)
            # Unnamed code is a different thing in each process (nginx's, the guest's JIT
            # code): named by its component, so one row does not mix them.
            if sym == "[unknown]" or sym.startswith("0x"):
                sym = f"[unknown] ({perf_breakdown.classify(dso, sym)})"
            add("kernel" if in_kernel else "user space", sym, server, ns)
    return list(rows), t


def table(title, columns, cells, names):
    """A Markdown table: a row per name (shown cut to 90 characters), a column per server."""
    print(f"\n{title}\n")
    print("| | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name in names:
        label = name[:90].replace("|", "\\|")
        print(f"| {label} | " + " | ".join(f"{cells[name].get(c, 0):.2f}" for c in columns)
              + " |")


def callers_report(outs, mode, concurrency, symbol, depth, top):
    """Print who called `symbol` in each server, in µs per call (the first run in `outs`)."""
    rows = load_rows(outs[0], mode, concurrency)
    chains = samples(os.path.join(outs[0], "perf.data"), rows, callers=symbol, depth=depth)
    cells = {}
    for server, by_chain in chains.items():
        for chain, ns in by_chain.items():
            cells.setdefault(chain, {})[server] = per_call(ns, rows[server])
    if len(outs) > 1:
        print(f"--callers reads one run: {outs[0]} (the others are not read)", file=sys.stderr)
    if cells and set(cells) == {"(no call chain)"}:
        sys.exit(f"{outs[0]}/perf.data has no call chains: record it with --call-graph")
    if not cells:
        sys.exit(f"no sample of any server is in {symbol} (check the name against the "
                 "kernel symbols table of --report)")
    for server in rows:
        cells.setdefault(f"all of {symbol}", {})[server] = sum(
            per_call(ns, rows[server]) for ns in chains[server].values())
    names = sorted(cells, key=lambda k: (not k.startswith("all of "),
                                         -max(cells[k].values()), k))[:top + 1]
    table(f"{mode}, concurrency {concurrency}: the callers of {symbol} (µs per call, "
          f"{depth} frames)", list(rows), cells, names)


def report(outs, mode, concurrency, top):
    """Print the tables of the runs in `outs`: each cell the median over the runs."""
    runs = [tables(out, mode, concurrency) for out in outs]
    cols = [c for c in PATHS if all(c in r[0] for r in runs)]
    merged = {}
    for name in runs[0][1]:
        keys = {k for _, t in runs for k in t[name]}
        merged[name] = {
            k: {c: statistics.median([t[name].get(k, {}).get(c, 0) for _, t in runs])
                for c in cols}
            for k in keys}
    many = f"the median of {len(runs)} runs" if len(runs) > 1 else "one run"
    print(f"{mode}, concurrency {concurrency}, {many}: CPU µs per call of each server in its "
          "row's window (the profile), against bench's figure from /proc")

    def largest(cells, n=None):
        return sorted(cells, key=lambda k: (-max(cells[k].values()), k))[:n]
    table("CPU per call (µs)", cols, merged["cpu"],
          ["bench (/proc)", "profile", "of it kernel", "of it user space"])
    table("By component (µs per call; perf_breakdown.py's rules)", cols, merged["components"],
          largest(merged["components"]))
    for part in ("kernel", "user space"):
        names = largest(merged[part], top)
        table(f"Top {len(names)} {part} symbols (µs per call, the largest in any column)",
              cols, merged[part], names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?")
    ap.add_argument("--out", default="/tmp/profile-rows",
                    help="where to write the run's perf.data (30-90 MB) and bench.json")
    ap.add_argument("--report", metavar="DIR", nargs="+",
                    help="only report on earlier runs' directories (each cell their median)")
    ap.add_argument("--only", default="non-stream", choices=["non-stream", "stream"])
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--duration-s", type=int, default=6)
    ap.add_argument("--top", type=int, default=30, help="symbols per table")
    ap.add_argument("--call-graph", action="store_true",
                    help="record kernel call chains too (perf record -g), for --callers")
    ap.add_argument("--callers", metavar="SYMBOL",
                    help="report who called SYMBOL in each server instead of the tables")
    ap.add_argument("--depth", type=int, default=3, help="caller frames shown by --callers")
    ap.add_argument("--server-bin", metavar="PATH",
                    help="profile the floor and the gateways of another build (bench --server-bin)")
    args = ap.parse_args()
    outs = args.report or [args.out]
    if args.report:
        if args.call_graph:
            sys.exit("--call-graph is for recording; --report reads runs already recorded")
        if len(set(outs)) < len(outs):
            sys.exit("--report names one directory twice: each counts as a run")
        check_dirs(outs)
    else:
        if not args.binary:
            sys.exit("give the polygateway binary, or --report DIR [DIR ...]")
        if args.server_bin and not (os.path.isfile(args.server_bin)
                                    and os.access(args.server_bin, os.X_OK)):
            sys.exit(f"--server-bin {args.server_bin}: no such executable")
        record(os.path.abspath(args.binary), args.out, args.only, args.concurrency,
               args.duration_s, args.call_graph or bool(args.callers),
               args.server_bin and os.path.abspath(args.server_bin))
    if args.callers:
        callers_report(outs, args.only, args.concurrency, args.callers, args.depth, args.top)
    else:
        report(outs, args.only, args.concurrency, args.top)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # the output piped into `head`
        sys.stderr.close()
