"""``GatewayClient``: the package's entry point over the Rust gateway (``_native``).

Every governed operation — source selection, breaker, limiter, retries, failover, stream
watchdog, cache, structured output, telemetry — runs in the Rust ``polygateway::Gateway``;
this module only shapes arguments and answers the Python way.
"""

from __future__ import annotations

import atexit
import dataclasses
import re
from collections import deque
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, overload

from . import _native
from ._types import EmbeddingResult, LLMResponse, OcrLayoutResult, OcrTextResult, StreamEnd, StreamItem, StreamStart
from .errors import ClientClosedError, InvalidRequestError, PolyGatewayError

__all__ = ["GatewayClient", "ChatStream"]

# Before the interpreter finalizes, let the tokio thread that handed back the last result
# release the GIL (python/src/exit.rs).
atexit.register(_native.quiesce)

Messages = Sequence[Mapping[str, Any]]
Structured = Literal["json"] | Mapping[str, Any] | type | None


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _schema_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "response"


def _structured(structured: Structured, params: dict[str, Any]) -> type | None:
    """Put the ``response_format`` of ``structured`` into ``params``; return the pydantic
    model to validate the answer into, if one was given."""
    if structured is None:
        return None
    if "response_format" in params:
        raise InvalidRequestError(
            "give either `structured` or `response_format`, not both", param="structured"
        )
    model: type | None = None
    if structured == "json":
        params["response_format"] = {"type": "json_object"}
        return None
    if isinstance(structured, Mapping):
        schema = dict(structured)
        name = str(schema.get("title", "response"))
    elif isinstance(structured, type) and hasattr(structured, "model_json_schema"):
        model = structured
        schema = structured.model_json_schema()  # type: ignore[attr-defined]
        name = structured.__name__
    else:
        raise InvalidRequestError(
            '`structured` must be None, "json", a JSON schema (dict) or a pydantic model class',
            param="structured",
        )
    params["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": _schema_name(name), "schema": schema, "strict": True},
    }
    return model


def _validated(resp: LLMResponse, model: type | None) -> LLMResponse:
    if model is None or resp.structured is None:
        return resp
    data = model.model_validate(resp.structured)  # type: ignore[attr-defined]
    return dataclasses.replace(resp, structured_data=data)


class ChatStream:
    """A streamed answer: an async iterator of typed deltas (``ContentDelta``,
    ``ReasoningDelta``, ``RefusalDelta``, ``ToolCallDelta``, ``FinishDelta``) whose last item
    is ``StreamEnd`` carrying the whole ``LLMResponse`` (also ``stream.response`` afterwards).

    The call has committed to a source when ``chat(stream=True)`` returns (``start``); a
    failure after that raises from the iteration (``StreamInterruptedError``,
    ``CallDeadlineExceeded``, …) and the output so far is incomplete. Leaving the iteration
    early, ``aclose()`` or cancelling the task cancels the call.
    """

    __slots__ = ("_native", "_model", "_items", "_error", "_done", "start", "response")

    def __init__(self, native: _native.NativeStream, start: StreamStart, model: type | None) -> None:
        self._native: _native.NativeStream | None = native
        self._model = model
        self._items: deque[StreamItem] = deque()
        self._error: BaseException | None = None
        self._done = False
        self.start = start
        self.response: LLMResponse | None = None

    @property
    def source_name(self) -> str:
        return self.start.source_name

    @property
    def attempts(self) -> int:
        return self.start.attempts

    @property
    def call_id(self) -> str:
        return self.start.call_id

    @property
    def cache_hit(self) -> bool:
        return self.start.cache_hit

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> StreamItem:
        while not self._items:
            if self._error is not None:
                error, self._error = self._error, None
                self._close()
                raise error
            if self._done or self._native is None:
                self._close()
                raise StopAsyncIteration
            try:
                items, error, done = await self._native.next_batch()
            except BaseException:
                # Cancelled (or interrupted) while waiting: the call goes with the stream.
                self._close()
                raise
            self._items.extend(items)
            self._error = error
            self._done = done
        item = self._items.popleft()
        if isinstance(item, StreamEnd):
            resp = _validated(item.response, self._model)
            if resp is not item.response:
                item = StreamEnd(resp)
            self.response = resp
        return item

    async def collect(self) -> LLMResponse:
        """Consume the rest of the stream and return the whole answer."""
        async for _ in self:
            pass
        if self.response is None:
            raise PolyGatewayError("the stream ended without its answer")
        return self.response

    def _close(self) -> None:
        self._done = True
        if self._native is not None:
            self._native.close()
            self._native = None

    async def aclose(self) -> None:
        """Stop the stream; a call still running is cancelled."""
        self._items.clear()
        self._close()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class GatewayClient:
    """One embedded gateway. Share one per process (it is safe to use from many tasks; its
    Rust side runs on a shared tokio runtime and never holds the GIL while it waits).

    Start it with ``GatewayClient.from_env()`` (``.env`` and the environment) or
    ``GatewayClient.from_settings({...})`` (explicit keys only); end it with ``await
    client.aclose()`` or ``async with``.
    """

    def __init__(self, native: _native.NativeGateway) -> None:
        self._native: _native.NativeGateway | None = native
        self._defaults = self._default_models(native.health())

    # ----- start and end -------------------------------------------------------------

    @classmethod
    def from_env(cls, path: str = ".env") -> GatewayClient:
        """Start from the ``.env`` file at ``path`` (relative to the working directory) and
        the process environment, which wins over the file — the keys of ``polygateway
        serve``. A missing ``.env`` is fine when ``path`` is the default; a missing file given
        explicitly is a ``ConfigError``. Every bad key is reported in one ``ConfigError``.

        Start-up loads the plugin components and opens telemetry: it blocks for a moment
        (the GIL released); call it once, at start-up.
        """
        return cls(_native.start_from_env(str(path), path != ".env"))

    @classmethod
    def from_settings(cls, settings: Mapping[str, object] | None = None, /, **keys: object) -> GatewayClient:
        """Start from explicit keys only (the process environment and ``.env`` are not read):
        ``from_settings({"LLM__OPENAI__1__BASE_URL": "...", ...})`` or as keyword arguments.
        Values may be ``str``, numbers or ``bool``."""
        merged: dict[str, object] = dict(settings or {})
        merged.update(keys)
        return cls(_native.start([(k, _setting(v)) for k, v in merged.items()]))

    async def aclose(self) -> None:
        """Write the queued telemetry rows and release the gateway. Idempotent; calls made
        after it raise ``ClientClosedError``."""
        native, self._native = self._native, None
        if native is not None:
            await native.flush_telemetry()

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ----- calls ---------------------------------------------------------------------

    @overload
    async def chat(
        self,
        messages: Messages,
        *,
        model: str | None = ...,
        stream: Literal[False] = ...,
        session_id: str | None = ...,
        parent_call_id: str | None = ...,
        cache_salt: str | None = ...,
        cache_namespace: str | None = ...,
        cache: Literal["bypass", "no-store"] | None = ...,
        structured: Structured = ...,
        structured_strategy: str | None = ...,
        deadline_s: float | None = ...,
        tenant_id: str | None = ...,
        meta: Mapping[str, str | int | float | bool] | None = ...,
        **params: Any,
    ) -> LLMResponse: ...

    @overload
    async def chat(
        self,
        messages: Messages,
        *,
        model: str | None = ...,
        stream: Literal[True],
        session_id: str | None = ...,
        parent_call_id: str | None = ...,
        cache_salt: str | None = ...,
        cache_namespace: str | None = ...,
        cache: Literal["bypass", "no-store"] | None = ...,
        structured: Structured = ...,
        structured_strategy: str | None = ...,
        deadline_s: float | None = ...,
        tenant_id: str | None = ...,
        meta: Mapping[str, str | int | float | bool] | None = ...,
        **params: Any,
    ) -> ChatStream: ...

    async def chat(
        self,
        messages: Messages,
        *,
        model: str | None = None,
        stream: bool = False,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        cache_salt: str | None = None,
        cache_namespace: str | None = None,
        cache: Literal["bypass", "no-store"] | None = None,
        structured: Structured = None,
        structured_strategy: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, str | int | float | bool] | None = None,
        **params: Any,
    ) -> LLMResponse | ChatStream:
        """One governed chat call on the scope aliased ``model`` (default: the only scope
        that serves chat). ``**params`` are sampling and tool parameters passed to the
        provider (``temperature``, ``max_tokens``, ``tools``, ``response_format``, …).

        ``structured``: ``"json"`` (any JSON object), a JSON schema (dict) or a pydantic
        model class: the answer goes through the structured-output ladder and
        ``resp.structured`` holds the parsed value (``resp.structured_data`` the model
        instance). ``deadline_s`` bounds the whole call (``CallDeadlineExceeded``).
        ``stream=True`` returns a ``ChatStream`` once the call has committed to a source.
        Cancelling the task cancels the call: its permits and upstream request are released.
        """
        native = self._require()
        model = model or self._default("chat")
        schema_model = _structured(structured, params)
        args = (
            model,
            messages,
            params or None,
            structured_strategy,
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )
        if stream:
            native_stream, start = await native.chat_stream(*args)
            return ChatStream(native_stream, start, schema_model)
        return _validated(await native.chat(*args), schema_model)

    def chat_sync(
        self,
        messages: Messages,
        *,
        model: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        cache_salt: str | None = None,
        cache_namespace: str | None = None,
        cache: Literal["bypass", "no-store"] | None = None,
        structured: Structured = None,
        structured_strategy: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, str | int | float | bool] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """``chat`` for scripts: **blocks the calling thread** until the answer is complete
        (the GIL is released meanwhile, so other threads run). Never call it from a coroutine:
        it would block the event loop; ``await client.chat(...)`` there."""
        native = self._require()
        model = model or self._default("chat")
        schema_model = _structured(structured, params)
        resp = native.chat_blocking(
            model,
            messages,
            params or None,
            structured_strategy,
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )
        return _validated(resp, schema_model)

    async def embed(
        self,
        texts: str | Sequence[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        cache_salt: str | None = None,
        cache_namespace: str | None = None,
        cache: Literal["bypass", "no-store"] | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, str | int | float | bool] | None = None,
    ) -> EmbeddingResult:
        """Embed ``texts`` (one vector per text, in order) on the scope aliased ``model``
        (default: the only scope that serves embeddings), in batches of each source's
        ``MAX_BATCH``, cached per input when a cache backend is on."""
        native = self._require()
        items = [texts] if isinstance(texts, str) else list(texts)
        return await native.embed(
            model or self._default("embedding"),
            items,
            dimensions,
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
            cache_namespace,
            cache_salt,
            cache,
        )

    async def recognize_text(
        self,
        image: bytes,
        *,
        model: str | None = None,
        file_name: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, str | int | float | bool] | None = None,
    ) -> OcrTextResult:
        """Recognise the text of ``image`` (PNG, JPEG, PDF, … bytes) on the scope aliased
        ``model`` (default: the only scope that serves OCR)."""
        native = self._require()
        return await native.recognize_text(
            model or self._default("ocr"),
            bytes(image),
            file_name,
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
        )

    async def parse_layout(
        self,
        image: bytes,
        *,
        model: str | None = None,
        file_name: str | None = None,
        session_id: str | None = None,
        parent_call_id: str | None = None,
        deadline_s: float | None = None,
        tenant_id: str | None = None,
        meta: Mapping[str, str | int | float | bool] | None = None,
    ) -> OcrLayoutResult:
        """Parse the layout of ``image``: elements with boxes in page coordinates and the
        page sizes."""
        native = self._require()
        return await native.parse_layout(
            model or self._default("ocr"),
            bytes(image),
            file_name,
            session_id,
            parent_call_id,
            deadline_s,
            tenant_id,
            meta,
        )

    async def check_ocr_health(self) -> dict[str, dict[str, bool]]:
        """Probe every OCR source: ``{scope: {source: healthy}}`` (2xx within 2 s)."""
        return await self._require().check_ocr_health()

    # ----- state ---------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The ``/healthz`` snapshot: per scope its sources (breaker state, in-flight
        attempts, plugin) and limiter use (``limiter.global.in_flight`` …), telemetry and
        cache status."""
        return self._require().health()

    def in_flight(self, scope: str | None = None) -> int:
        """Attempts holding a limiter permit now, in ``scope`` (e.g. ``"LLM"``) or in all."""
        scopes = self.health()["scopes"]
        names = [scope] if scope is not None else list(scopes)
        return sum(int(scopes[name]["limiter"]["global"]["in_flight"]) for name in names)

    def metrics_text(self) -> str:
        """Every metric in the Prometheus text format (``/metrics``)."""
        return self._require().metrics_text()

    @property
    def aliases(self) -> list[str]:
        """The model aliases of the configuration."""
        return self._require().aliases()

    async def flush_telemetry(self) -> None:
        """Wait until the telemetry rows of finished calls are written."""
        await self._require().flush_telemetry()

    # ----- internals -----------------------------------------------------------------

    def _require(self) -> _native.NativeGateway:
        if self._native is None:
            raise ClientClosedError("the GatewayClient is closed")
        return self._native

    @staticmethod
    def _default_models(health: Mapping[str, Any]) -> dict[str, str | None]:
        """Per capability, the first alias of the only scope that serves it (``None`` when
        no scope or several do)."""
        found: dict[str, list[str]] = {"chat": [], "embedding": [], "ocr": []}
        for scope in health.get("scopes", {}).values():
            serves = {s for src in scope.get("sources", []) for s in src.get("serves", [])}
            aliases = scope.get("aliases") or []
            for capability, scopes in found.items():
                if capability in serves and aliases:
                    scopes.append(aliases[0])
        return {c: (s[0] if len(s) == 1 else None) for c, s in found.items()}

    def _default(self, capability: str) -> str:
        model = self._defaults.get(capability)
        if model is None:
            raise InvalidRequestError(
                f"`model` is required: no single scope serves {capability} "
                f"(aliases: {', '.join(self.aliases) or 'none'})",
                param="model",
            )
        return model
