#!/usr/bin/env python3
"""The live heap of a gateway process at its peak, by allocation site, from jemalloc's own
heap profiles (README, "Benchmark").

Usage:

    cargo build --release -p polygateway --features tikv-jemallocator/profiling
    mkdir -p /tmp/heap
    _RJEM_MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:16,prof_gdump:true,prof_prefix:/tmp/heap/h \\
        target/release/polygateway bench --only paced
    python3 host/src/bench/heap_sites.py target/release/polygateway /tmp/heap            # the processes
    python3 host/src/bench/heap_sites.py target/release/polygateway /tmp/heap --pid N    # one of them

`prof_gdump` makes every process of the run (the bench, each `serve` and its compile child)
write a profile each time its mapped memory reaches a new high, so a process's last profile
is its peak. Without `--pid` the script lists each process with its number of profiles and
the live heap of its last one. The bench starts its children in this order: the pass-through
(`bench-passthrough`), then the `serve` of gateway, gateway-off and gateway-keyed, each
followed by its compile child; `ps` during the run tells which pid is which. With `--pid` it prints that process's peak by
allocation site: the first frame outside the allocator and the containers that call it,
with the frames that called it, the live bytes, the average object size and the bytes per
stream (`--streams`, default 512: the paced load's concurrency).

jemalloc samples one allocation per `2^lg_prof_sample` bytes on average (64 KiB above) and
scales each sample back up, as its own `jeprof` does; a site's figure is an estimate (about
±15 % for a site of a few MiB). jemalloc records an object at its size class (8 KiB, 10 KiB,
12 KiB, …), so "average bytes" is of the classes allocated, not of the sizes asked for. Frames are named with binutils' `addr2line` on the binary
(built with line tables, as the release profile is).
"""

import argparse
import collections
import math
import os
import re
import subprocess
import sys

# Frames skipped when naming a site: the allocator, the profiler and the containers and
# smart pointers through which code allocates.
SKIP = re.compile(
    r"prof_|_rjem|je_|imalloc|ialloc|malloc_default|__rust_|alloc::|RawVec|do_reserve|"
    r"finish_grow|BytesMut|bytes::|core::ptr"
)


def parse(path):
    """(sample interval, [(addresses, scaled bytes, objects, average size)], mappings)."""
    text = open(path).read()
    head, _, rest = text.partition("\n")
    m = re.fullmatch(r"heap_v2/(\d+)", head.strip())
    if not m:
        sys.exit(f"{path}: not a jemalloc heap profile (first line {head[:40]!r}, want heap_v2/<n>)")
    interval = int(m.group(1))
    body, _, maps = rest.partition("MAPPED_LIBRARIES:")
    stacks = []
    addrs = None
    for line in body.splitlines():
        if line.startswith("@"):
            addrs = [int(a, 16) for a in line[1:].split()]
        elif addrs is not None and line.strip().startswith("t*:"):
            m = re.match(r"\s*t\*: (\d+): (\d+)", line)
            if not m:
                sys.exit(f"{path}: unreadable counts line {line.strip()[:60]!r}")
            count, size = int(m.group(1)), int(m.group(2))
            if count:
                mean = size / count
                scale = 1 / (1 - math.exp(-mean / interval))
                stacks.append((addrs, size * scale, count * scale, mean))
            addrs = None
    return interval, stacks, maps


def binary_mappings(maps, binary):
    """The binary's load base (where its first segment is mapped: a PIE's base) and the
    address ranges of its segments, from the profile's copy of `/proc/<pid>/maps`."""
    name = os.path.realpath(binary)
    base, ranges = None, []
    for line in maps.splitlines():
        fields = line.split()
        path = " ".join(fields[5:]).removesuffix(" (deleted)")
        if len(fields) >= 6 and os.path.realpath(path) == name:
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            ranges.append((lo, hi))
            if fields[2] == "00000000":
                base = lo
    if base is None:
        sys.exit(f"{binary} is not among the profile's mappings: is it the binary that ran?")
    return base, ranges


def symbolize(binary, base, ranges, addresses):
    """Function names of return addresses (each minus one: the call, not the next
    instruction); an address outside the binary (libc, the vDSO) is named `[outside]`."""
    inside = sorted(a for a in addresses if any(lo <= a < hi for lo, hi in ranges))
    names = {a: "[outside the binary]" for a in addresses}
    addresses = inside
    query = "\n".join(hex(a - base - 1) for a in addresses)
    try:
        out = subprocess.run(
            ["addr2line", "-f", "-C", "-e", binary],
            input=query,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"addr2line (binutils) could not name the frames: {e}")
    names.update({a: out[2 * i] for i, a in enumerate(addresses)})
    return names


def profiles(directory):
    """{pid: [paths in sequence order]} of the `prefix.pid.seq.*.heap` files in `directory`."""
    by_pid = collections.defaultdict(list)
    if not os.path.isdir(directory):
        sys.exit(f"{directory}: no such directory")
    for name in os.listdir(directory):
        m = re.match(r".*\.(\d+)\.(\d+)\.[a-z]\d+\.heap$", name)
        if m:
            by_pid[int(m.group(1))].append((int(m.group(2)), os.path.join(directory, name)))
    return {pid: [p for _, p in sorted(files)] for pid, files in by_pid.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("directory")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--frames", type=int, default=3, help="frames shown per site")
    args = ap.parse_args()
    if args.streams < 1:
        sys.exit("--streams must be at least 1")

    found = profiles(args.directory)
    if not found:
        sys.exit(f"no jemalloc heap profiles (*.heap) in {args.directory}")
    if args.pid is None:
        print("| pid | profiles | live heap at the last one, MiB |")
        print("|---|---|---|")
        for pid in sorted(found):
            _, stacks, _ = parse(found[pid][-1])
            total = sum(s[1] for s in stacks)
            print(f"| {pid} | {len(found[pid])} | {total / 2**20:.1f} |")
        return
    if args.pid not in found:
        sys.exit(f"no profile of pid {args.pid} in {args.directory}")

    path = found[args.pid][-1]
    _, stacks, maps = parse(path)
    base, ranges = binary_mappings(maps, args.binary)
    names = symbolize(args.binary, base, ranges, {a for s in stacks for a in s[0]})
    sites = collections.defaultdict(lambda: [0.0, 0.0])
    for addrs, size, count, _ in stacks:
        frames = [names[a] for a in addrs if not SKIP.search(names[a])]
        key = " ← ".join(f[:100] for f in frames[: args.frames]) or "(allocator frames only)"
        sites[key][0] += size
        sites[key][1] += count
    total = sum(v[0] for v in sites.values())
    print(f"{os.path.basename(path)}: live heap {total / 2**20:.1f} MiB in {len(stacks)} sampled stacks")
    print(f"| site | MiB | objects | average bytes | KiB per stream ({args.streams}) |")
    print("|---|---|---|---|---|")
    for key, (size, count) in sorted(sites.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(
            f"| {key} | {size / 2**20:.2f} | {count:.0f} | {size / count:.0f} | "
            f"{size / args.streams / 1024:.1f} |"
        )


if __name__ == "__main__":
    main()
