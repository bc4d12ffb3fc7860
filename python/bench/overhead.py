"""Per-call cost of the Python binding (Python → Rust → Python), measured in this process.

- `roundtrip`: `_native.bench_roundtrip` converts `chat`'s arguments as `chat` does, completes
  an asyncio future from the tokio runtime and builds an `LLMResponse` — everything but the
  gateway: the binding's own overhead per call.
- `cache_hit` (with a mock upstream): `await client.chat(...)` answered by the in-memory
  response cache — binding plus the gateway's pipeline, no upstream request.
- `upstream` (with a mock upstream): a whole governed call to the mock, sequentially.

Run: `.venv/bin/python python/bench/overhead.py [MOCK_BASE_URL]`, e.g. with
`polygateway mock-upstream --listen 127.0.0.1:9099` running: `http://127.0.0.1:9099/v1`.
Prints one line per measurement (mean, p50, p99 in microseconds).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from polygateway import GatewayClient, _native

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there, how are you?"}]


def summary(name: str, samples_ns: list[int]) -> dict[str, float]:
    us = sorted(s / 1000 for s in samples_ns)
    result = {"mean_us": statistics.fmean(us), "p50_us": us[len(us) // 2], "p99_us": us[int(len(us) * 0.99)]}
    print(f"{name:<10} n={len(us):>6}  mean {result['mean_us']:8.1f} µs  p50 {result['p50_us']:8.1f} µs  p99 {result['p99_us']:8.1f} µs")
    return result


async def timed(call: Callable[[], Awaitable[object]], n: int) -> list[int]:
    for _ in range(min(200, n)):
        await call()
    samples = []
    for _ in range(n):
        t = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - t)
    return samples


async def measure(mock_base_url: str | None = None, n: int = 5000) -> dict[str, dict[str, float]]:
    out = {"roundtrip": summary("roundtrip", await timed(lambda: _native.bench_roundtrip(MESSAGES, {"temperature": 0.2}), n))}
    if mock_base_url is None:
        return out
    keys = {
        "PGW_TELEMETRY_BACKEND": "none",
        "PGW_CACHE_BACKEND": "memory",
        "LLM__CACHE__TTL_S": 600,
        "LLM__OPENAI__1__BASE_URL": mock_base_url,
        "LLM__OPENAI__1__MODEL": "bench-model",
    }
    async with GatewayClient.from_settings(keys) as client:
        out["cache_hit"] = summary("cache_hit", await timed(lambda: client.chat(MESSAGES, temperature=0.2), n))
        out["upstream"] = summary("upstream", await timed(lambda: client.chat(MESSAGES, cache="bypass"), max(n // 5, 1)))
    return out


if __name__ == "__main__":
    asyncio.run(measure(sys.argv[1] if len(sys.argv) > 1 else None))
