"""Test kit of the Python package: the project's mock upstream (`polygateway mock-upstream`,
the debug binary cargo builds) on a free port for the session, scripted per test over HTTP
(`PUT /_mock/scenarios/<name>`), and the settings of sources on it. Every test uses scenario
names and Redis key prefixes of its own (`uid`), so tests never see each other's state.

The binary is `$POLYGATEWAY_BIN`, else `debug/polygateway` under `$CARGO_TARGET_DIR`, else
under the repository's `target/`. Redis must answer on 127.0.0.1:6379.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
REDIS = ("127.0.0.1", 6379)


def polygateway_bin() -> Path:
    if os.environ.get("POLYGATEWAY_BIN"):
        return Path(os.environ["POLYGATEWAY_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    return target / "debug" / "polygateway"


class Mock:
    """The mock upstream process."""

    def __init__(self, proc: subprocess.Popen[str], addr: str) -> None:
        self.proc = proc
        self.addr = addr

    def base_url(self, scenario: str) -> str:
        """A chat or embeddings source's `BASE_URL` on `scenario`."""
        return f"http://{self.addr}/sc/{scenario}/v1"

    def ocr_base_url(self, scenario: str) -> str:
        return f"http://{self.addr}/sc/{scenario}"

    def script(self, scenario: str, script: dict[str, Any]) -> None:
        req = urllib.request.Request(
            f"http://{self.addr}/_mock/scenarios/{scenario}",
            data=json.dumps(script).encode(),
            method="PUT",
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 204

    def set_health(self, scenario: str, status: int) -> None:
        req = urllib.request.Request(
            f"http://{self.addr}/_mock/scenarios/{scenario}/health",
            data=json.dumps({"status": status}).encode(),
            method="PUT",
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status in (200, 204)

    def hits(self, scenario: str) -> list[dict[str, Any]]:
        """The requests the scenario received since it was last scripted (the latest 10,000)."""
        with urllib.request.urlopen(f"http://{self.addr}/_mock/scenarios/{scenario}/hits", timeout=5) as resp:
            return json.loads(resp.read())["hits"]

    async def wait_hits(self, scenario: str, pred: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The hits of `scenario` once `pred` holds of them (polled off the event loop)."""
        deadline = time.monotonic() + timeout_s
        while True:
            hits = await asyncio.to_thread(self.hits, scenario)
            if pred(hits) or time.monotonic() > deadline:
                return hits
            await asyncio.sleep(0.02)


@pytest.fixture(scope="session")
def mock() -> Iterator[Mock]:
    binary = polygateway_bin()
    if not binary.is_file():
        pytest.fail(f"{binary} not found: build it with `cargo build -p polygateway` or set POLYGATEWAY_BIN")
    proc = subprocess.Popen(
        [str(binary), "mock-upstream", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://(\S+)", line)
    if not found:
        proc.kill()
        pytest.fail(f"mock upstream did not start: {line!r}")
    try:
        yield Mock(proc, found.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_up() -> None:
    try:
        with socket.create_connection(REDIS, timeout=2) as s:
            s.sendall(b"PING\r\n")
            assert s.recv(16).startswith(b"+PONG")
    except OSError as e:  # pragma: no cover - environment
        pytest.fail(f"Redis is not answering on {REDIS[0]}:{REDIS[1]}: {e}")


@pytest.fixture
def uid() -> str:
    """A name unique to this test: scenario names and Redis prefixes."""
    return uuid.uuid4().hex[:12]


def source(mock: Mock, scope: str, provider: str, n: int, scenario: str, model: str, **fields: object) -> dict[str, object]:
    """The keys of source `{scope}__{PROVIDER}__{n}` on a mock scenario."""
    p = f"{scope}__{provider.upper()}__{n}__"
    keys: dict[str, object] = {
        f"{p}BASE_URL": mock.base_url(scenario),
        f"{p}MODEL": model,
        f"{p}API_KEY": f"sk-{scenario}",
    }
    keys.update({f"{p}{k.upper()}": v for k, v in fields.items()})
    return keys


def base(scope: str = "LLM", **extra: object) -> dict[str, object]:
    """Settings every test starts from: no telemetry file, deterministic source order
    (first call → first source), short back-off."""
    keys: dict[str, object] = {
        "PGW_TELEMETRY_BACKEND": "none",
        f"{scope}__SELECTOR": "round-robin",
        f"{scope}__RETRY__BASE_DELAY_S": 0.01,
    }
    keys.update(extra)
    return keys


def redis_keys(prefix: str) -> dict[str, object]:
    """Limiter, breaker and cache state in Redis under a prefix of the test's own."""
    return {
        "PGW_REDIS_URL": "redis://127.0.0.1:6379",
        "PGW_REDIS_PREFIX": f"pgw-py-{prefix}:",
        "PGW_LIMITER_BACKEND": "redis",
        "PGW_BREAKER_BACKEND": "redis",
    }


async def eventually(pred: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Whether `pred` holds within `timeout_s` (polled every 10 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return pred()
