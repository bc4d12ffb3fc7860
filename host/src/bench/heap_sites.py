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
the live heap of its last one (the bench's `serve` processes are started in the order of its
tables: gateway, gateway-off, gateway-keyed). With `--pid` it prints that process's peak by
allocation site: the first frame outside the allocator and the containers that call it,
with the frames that called it, the live bytes, the average object size and the bytes per
stream (`--streams`, default 512: the paced load's concurrency).

jemalloc samples one allocation per `2^lg_prof_sample` bytes on average (64 KiB above) and
scales each sample back up, as its own `jeprof` does; a site's figure is an estimate (about
±15 % for a site of a few MiB). Frames are named with binutils' `addr2line` on the binary
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
    interval = int(head.split("/")[1])
    body, _, maps = rest.partition("MAPPED_LIBRARIES:")
    stacks = []
    addrs = None
    for line in body.splitlines():
        if line.startswith("@"):
            addrs = [int(a, 16) for a in line[1:].split()]
        elif addrs is not None and line.strip().startswith("t*:"):
            m = re.match(r"\s*t\*: (\d+): (\d+)", line)
            count, size = int(m.group(1)), int(m.group(2))
            if count:
                mean = size / count
                scale = 1 / (1 - math.exp(-mean / interval))
                stacks.append((addrs, size * scale, count * scale, mean))
            addrs = None
    return interval, stacks, maps


def load_base(maps, binary):
    """The address the binary's first segment is mapped at (a PIE's load base)."""
    name = os.path.realpath(binary)
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) >= 6 and os.path.realpath(fields[-1]) == name and fields[2] == "00000000":
            return int(fields[0].split("-")[0], 16)
    sys.exit(f"{binary} is not among the profile's mappings: is it the binary that ran?")


def symbolize(binary, base, addresses):
    """Function names of return addresses (each minus one: the call, not the next instruction)."""
    addresses = sorted(addresses)
    query = "\n".join(hex(a - base - 1) for a in addresses)
    out = subprocess.run(
        ["addr2line", "-f", "-C", "-e", binary],
        input=query,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {a: out[2 * i] for i, a in enumerate(addresses)}


def profiles(directory):
    """{pid: [paths in sequence order]} of the `prefix.pid.seq.*.heap` files in `directory`."""
    by_pid = collections.defaultdict(list)
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
    base = load_base(maps, args.binary)
    names = symbolize(args.binary, base, {a for s in stacks for a in s[0]})
    sites = collections.defaultdict(lambda: [0.0, 0.0])
    for addrs, size, count, _ in stacks:
        frames = [names[a] for a in addrs if not SKIP.search(names[a])]
        key = " ← ".join(f[:100] for f in frames[: args.frames])
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
