#!/usr/bin/env python3
"""The benchmark's targets against nginx as a Markdown table, one column group per run, from
the JSON files `polygateway bench --out` writes (README, "Benchmark").

Usage:

    python3 host/src/bench/targets.py host/src/bench/results/RUN1.json RUN2.json RUN3.json

Every figure is read from the files or computed as `bench` computes it: the ratios are the
`derived.nginx` block `bench` writes (the default configuration against nginx in the same run),
the c=1 bound is 2 × nginx's added p99 (negative counted as 0) + 100 µs as in `bench`, the
absolute CPU figures are the rows' `cpu_s_per_1k` (CPU seconds per 1,000 calls, so µs per call
is that × 1,000) at the run's highest concurrency, the one `bench` takes its CPU ratios at. A
target is counted as met in a run when the run's figure is within it; a run without a figure
(a subset run, `--only`) shows "–" and is not counted in that row's "met" column, whose "of"
says how many runs had the figure. The floor rows (`passthrough`: the gateway's own HTTP stack forwarding bytes) and
everything off (`gateway-off`) are for reading the gateway's rows against, not targets.
"""

import argparse
import json
import sys


def row(d, path, mode, concurrency):
    for r in d.get("rows", []):
        if r["path"] == path and r["mode"] == mode and r["concurrency"] == concurrency:
            return r
    return None


def top_concurrency(d):
    levels = [r["concurrency"] for r in d.get("rows", [])]
    return max(levels) if levels else None


def cpu_us(d, path, mode="non-stream", concurrency=None):
    r = row(d, path, mode, concurrency if concurrency is not None else top_concurrency(d))
    return None if r is None or r.get("cpu_s_per_1k") is None else r["cpu_s_per_1k"] * 1000.0


def paced(d, path):
    for p in d.get("paced") or []:
        if p["path"] == path:
            return p
    return None


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="results of `polygateway bench --out`")
    args = ap.parse_args()
    runs = []
    for f in args.files:
        with open(f) as fh:
            runs.append(json.load(fh))

    def nginx(d):
        return d.get("derived", {}).get("nginx") or {}

    lines = []  # (target, [(text, met or None)])

    def add(target, cells):
        lines.append((target, cells))

    def c1(d):
        n = nginx(d)
        got, own = n.get("added_p99_c1_us"), n.get("nginx_added_p99_c1_us")
        if got is None or own is None:
            return ("–", None)
        bound = 2 * max(own, 0.0) + 100
        return (f"{got:,.0f} ({bound:,.0f}) µs", got <= bound)

    add("c=1 added p99 ≤ 2 × nginx's + 0.1 ms (the bound)", [c1(d) for d in runs])

    def throughput(d):
        t = sorted((c, v) for c, v in nginx(d).get("throughput_non_stream") or [])
        if not t:
            return ("–", None)
        return (" ".join(f"{v * 100:.0f}" for _, v in t) + " %", all(v >= 0.6 for _, v in t))

    add("non-streamed throughput ≥ 60 % of nginx's at every concurrency above 1 (c=32, c=128)",
        [throughput(d) for d in runs])

    def cpu_request(d):
        ratio, us = nginx(d).get("cpu_per_request"), cpu_us(d, "gateway")
        if ratio is None or us is None:
            return ("–", None)
        return (f"{us:.1f} µs: {ratio:.2f}×", ratio <= 2.5)

    add("CPU per non-streamed request ≤ 2.5× nginx's (highest concurrency: c=128)",
        [cpu_request(d) for d in runs])

    def cpu_chunk(d):
        ratio, us = nginx(d).get("cpu_per_chunk"), d.get("derived", {}).get("cpu_per_chunk_us")
        if ratio is None or us is None:
            return ("–", None)
        return (f"{us:.2f} µs: {ratio:.2f}×", ratio <= 2.0)

    add("CPU per streamed chunk ≤ 2× nginx's (highest concurrency: c=128)",
        [cpu_chunk(d) for d in runs])

    def one_figure(value, shown, within):
        """A row read from one figure of each run: `value(d)`, shown as `shown` (a format
        spec and a unit), met when `within(v)`."""
        def cell(d):
            v = value(d)
            return ("–", None) if v is None else (format(v, shown[0]) + shown[1], within(v))
        return [cell(d) for d in runs]

    add("512 paced streams: added TTFT p50 ≤ 2× nginx's",
        one_figure(lambda d: nginx(d).get("paced_added_ttft"), (".2f", "×"), lambda v: v <= 2.0))
    add("512 paced streams: max-gap p99 ≤ nginx's + 5 ms",
        one_figure(lambda d: nginx(d).get("paced_max_gap_p99_minus_nginx_ms"), ("+.1f", " ms"),
                   lambda v: v <= 5.0))
    add("512 paced streams: 0 stalled of 1,536",
        one_figure(lambda d: nginx(d).get("paced_stalled"), ("", ""), lambda v: v == 0))
    add("peak RSS under 512 paced streams ≤ 80 MiB",
        one_figure(lambda d: nginx(d).get("paced_peak_rss_mib"), (".1f", " MiB"),
                   lambda v: v <= 80.0))
    add("wasm provider within 1.25× of native, end to end",
        one_figure(lambda d: d.get("derived", {}).get("wasm_vs_native_end_to_end"), (".2f", "×"),
                   lambda v: v <= 1.25))

    names = " / ".join(str(i + 1) for i in range(len(runs)))
    print(f"| target | run {names} | met |")
    print("|---|---|---|")
    for target, cells in lines:
        shown = " / ".join(f"**{t}**" if met else t for t, met in cells)
        met = sum(1 for _, m in cells if m)
        had = sum(1 for _, m in cells if m is not None)
        print(f"| {target} | {shown} | {met} of {had} |")

    print()
    for label, path in [("nginx", "nginx"), ("the floor (passthrough)", "passthrough"),
                        ("everything off", "gateway-off"), ("the default gateway", "gateway")]:
        us = [cpu_us(d, path) for d in runs]
        line = f"{label}: CPU per non-streamed call at the highest concurrency " + " / ".join(
            fmt(u, ".1f") for u in us) + " µs"
        if path != "nginx":
            ratios = []
            for d, u in zip(runs, us):
                n = cpu_us(d, "nginx")
                ratios.append(None if u is None or not n else u / n)
            line += " (" + " / ".join(fmt(r, ".2f") for r in ratios) + "× nginx's)"
        p = [paced(d, path) for d in runs]
        if any(x is not None for x in p):
            line += "; paced added TTFT p50 " + " / ".join(
                fmt(None if x is None or x.get("added_ttft_p50_us") is None else x["added_ttft_p50_us"] / 1000.0, ".1f")
                for x in p) + " ms, peak RSS " + " / ".join(
                fmt(None if x is None else x.get("peak_rss_mib"), ".1f") for x in p) + " MiB"
        print(line)
    machines = sorted({d.get("machine", "?") for d in runs})
    print(f"machine: {', '.join(machines)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
