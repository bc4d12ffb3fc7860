"""Load: 1,000 concurrent calls from one event loop complete, with flat memory across
rounds; and the binding's per-call overhead (python/bench/overhead.py) stays bounded."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import statistics
import sys
from pathlib import Path

from conftest import Mock, base, source
from polygateway import GatewayClient
from polygateway._native import allocator_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import overhead  # noqa: E402

HELLO = [{"role": "user", "content": "say hello to the test"}]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def glibc_heap() -> tuple[int, int]:
    """glibc malloc's bytes in use and free-but-kept (Python's objects above 512 bytes, and
    what any thread allocates outside jemalloc), from mallinfo2(3)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd, m.fordblks


ROUNDS = 10
WARMUP = 2


async def test_a_thousand_concurrent_calls_complete_with_flat_memory(mock: Mock, uid: str) -> None:
    async with GatewayClient.from_settings(base(**source(mock, "LLM", "openai", 1, uid, "gpt-x"))) as client:
        samples = []
        for _ in range(ROUNDS):
            answers = await asyncio.gather(*(client.chat(HELLO) for _ in range(1000)))
            assert len(answers) == 1000
            assert {(a.content, a.attempts, a.source_name) for a in answers} == {("Hello from the mock upstream.", 1, "openai-1")}
            assert len({a.call_id for a in answers}) == 1000
            del answers
            gc.collect()
            # jemalloc keeps the freed pages of a burst for reuse (they decay over ~10 s);
            # purging them first makes RSS show what is live.
            rust = allocator_stats(purge=True)
            samples.append({
                "rust_allocated": rust["allocated"],
                "rust_resident": rust["resident"],
                "python_blocks": sys.getallocatedblocks(),
                "glibc_in_use": glibc_heap()[0],
                "glibc_free": glibc_heap()[1],
                "rss": rss_kib() * 1024,
            })
        assert client.in_flight() == 0
    mib = 1024 * 1024
    for key in samples[0]:
        print(f"{key} (MiB) after each round: {[round(s[key] / mib, 2) for s in samples]}")
    print(f"python_blocks after each round: {[s['python_blocks'] for s in samples]}")
    after_warmup = samples[WARMUP:]

    def growth(key: str) -> int:
        return max(s[key] for s in after_warmup) - after_warmup[0][key]

    def trend(key: str) -> float:
        # The median of the last three rounds minus that of the first three: a leak grows
        # round after round, while a single round's count can sit a few hundred blocks off
        # (asyncio's and the collector's own objects at the moment of the sample; one CI run
        # saw 237,106 then 237,825 with no growth between the medians).
        first = statistics.median(s[key] for s in after_warmup[:3])
        last = statistics.median(s[key] for s in after_warmup[-3:])
        return last - first

    # Nothing is kept per call, in either heap. After the warm-up rounds the gateway's live
    # Rust heap holds the idle upstream connections a round leaves in the pool (~900 after
    # 1,000 concurrent calls, each with hyper's read and write buffers, ~24 KiB), and which of
    # them survive a round varies: a loaded machine saw a single round 3–4 MiB above the
    # others. So the Rust heap is judged, like Python's objects, by the medians of the first
    # and last three rounds (5,000 calls apart): a call whose state or answer stayed behind
    # would add at least 800 bytes a call, 4 MiB between them. Python's live objects: a call
    # that left one object behind would add 1,000 blocks a round, 5,000 between the medians;
    # without a leak the count wanders by a few hundred blocks a round (asyncio's handles and
    # futures not yet collected at the sample: one CI run on a loaded machine saw 237,014 →
    # 237,734 → 237,279 → 237,880 over its last rounds, 688 between the medians, where
    # quiet runs see ~11 a round). The bound is half a block per call between the medians'
    # rounds: every per-call leak exceeds it, that wander does not.
    assert trend("rust_allocated") < 4 * mib, samples
    assert trend("python_blocks") < (len(after_warmup) - 3) * 1000 // 2, samples
    # The process: with jemalloc's free pages returned, RSS stays within 16 MiB of its
    # level after the warm-up (a leak of the size above would show here too).
    assert growth("rss") < 16 * mib, samples


async def test_the_binding_overhead_per_call_is_bounded(mock: Mock, uid: str) -> None:
    result = await overhead.measure(mock.base_url(uid), n=2000)
    # Measured on the 2-core CI machine with the dev profile: see python/README.md.
    assert result["roundtrip"]["p50_us"] < 1000
    assert result["cache_hit"]["p50_us"] < 5000
