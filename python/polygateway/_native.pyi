# Stubs of the Rust extension module (python/src/). Positional arguments mirror
# GatewayClient's keyword arguments; see _client.py.
from collections.abc import Mapping, Sequence
from typing import Any

from ._types import EmbeddingResult, LLMResponse, OcrLayoutResult, OcrTextResult, StreamItem, StreamStart

__version__: str

def start(vars: list[tuple[str, str]]) -> NativeGateway: ...
def start_from_env(path: str, required: bool) -> NativeGateway: ...
def quiesce() -> None: ...
def allocator_stats(purge: bool = False) -> dict[str, int]:
    """jemalloc's counters for the Rust heap in bytes: ``allocated`` (live) and ``resident``;
    ``purge`` first returns jemalloc's dirty pages to the system."""
    ...
async def bench_roundtrip(messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> LLMResponse: ...

class NativeStream:
    async def next_batch(self) -> tuple[list[StreamItem], BaseException | None, bool]: ...
    def close(self) -> None: ...

class NativeGateway:
    async def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any] | None = None,
        structured_strategy: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        cache_namespace: str | None = None,
        cache_salt: str | None = None,
        cache: str | None = None,
    ) -> LLMResponse: ...
    def chat_blocking(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any] | None = None,
        structured_strategy: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        cache_namespace: str | None = None,
        cache_salt: str | None = None,
        cache: str | None = None,
    ) -> LLMResponse: ...
    async def chat_stream(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any] | None = None,
        structured_strategy: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        cache_namespace: str | None = None,
        cache_salt: str | None = None,
        cache: str | None = None,
    ) -> tuple[NativeStream, StreamStart]: ...
    async def embed(
        self,
        model: str,
        texts: list[str],
        dimensions: int | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        cache_namespace: str | None = None,
        cache_salt: str | None = None,
        cache: str | None = None,
    ) -> EmbeddingResult: ...
    async def recognize_text(
        self,
        model: str,
        image: bytes,
        file_name: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> OcrTextResult: ...
    async def parse_layout(
        self,
        model: str,
        image: bytes,
        file_name: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> OcrLayoutResult: ...
    async def check_ocr_health(self) -> dict[str, dict[str, bool]]: ...
    def health(self) -> dict[str, Any]: ...
    def metrics_text(self) -> str: ...
    def aliases(self) -> list[str]: ...
    async def flush_telemetry(self) -> None: ...
