"""The answer types: frozen dataclasses built by the Rust binding (by keyword) and
constructible by hand — every field has a default, so a test's fake ``LLMResponse(content=…)``
keeps working as fields are added.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "Usage",
    "ToolCall",
    "LLMResponse",
    "StreamStart",
    "ContentDelta",
    "ReasoningDelta",
    "RefusalDelta",
    "ToolCallDelta",
    "FinishDelta",
    "StreamEnd",
    "StreamItem",
    "EmbeddingResult",
    "OcrTextResult",
    "OcrElement",
    "OcrPageSize",
    "OcrLayoutResult",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the upstream reported it. ``None`` = not reported (not zero)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call; ``arguments`` is the JSON text the model produced."""

    index: int = 0
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """The answer of one call.

    ``usage_source``: ``measured`` (usage reported for a complete answer), ``estimated``
    (reported, but the stream was salvaged without its end marker) or ``unavailable`` (no
    usage: ``usage`` is ``None`` and ``cost`` is ``None``). ``cost`` is in the currency of
    ``PGW_PRICING_FILE``; ``None`` without a price table or a price for ``model``; ``0.0`` on
    a cache hit. ``cache_hit`` is this gateway's response cache (never the provider's prompt
    cache: see ``usage.cached_prompt_tokens``). ``structured`` is the parsed JSON of a call
    that asked for structured output; ``structured_data`` the same, validated into the
    pydantic model when ``chat(structured=Model)`` was given one.
    """

    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    usage_source: str = "unavailable"
    model: str = ""
    model_reported: str | None = None
    provider: str = ""
    source_name: str = ""
    scope: str = ""
    attempts: int = 0
    cache_hit: bool = False
    ttft_ms: float | None = None
    max_inter_token_ms: float | None = None
    latency_ms: int = 0
    overhead_us: int = 0
    cost: float | None = None
    call_id: str = ""
    created: int = 0
    salvaged: bool = False
    refusal: str | None = None
    structured: Any = None
    structured_data: Any = None
    reasoning_details: tuple[Any, ...] = ()

    @property
    def source(self) -> str:
        """The source that answered (``source_name``)."""
        return self.source_name

    @property
    def thinking(self) -> str:
        """The reasoning text, ``""`` when none (the reference's name for ``reasoning``)."""
        return self.reasoning or ""

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens if self.usage else 0

    @property
    def completion_tokens(self) -> int:
        return self.usage.completion_tokens if self.usage else 0

    @property
    def cached_prompt_tokens(self) -> int | None:
        return self.usage.cached_prompt_tokens if self.usage else None


@dataclass(frozen=True, slots=True)
class StreamStart:
    """The head of a streamed answer: the call committed to ``source_name``."""

    call_id: str = ""
    source_name: str = ""
    model: str = ""
    model_reported: str | None = None
    attempts: int = 0
    cache_hit: bool = False
    overhead_us: int = 0


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Answer text to append."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Reasoning ("thinking") text to append."""

    text: str


@dataclass(frozen=True, slots=True)
class RefusalDelta:
    """Refusal text to append: the model declined."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of tool call ``index``: fields to set (``id``, ``name``) or append
    (``arguments``)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(frozen=True, slots=True)
class FinishDelta:
    """The answer finished: ``stop``, ``length``, ``tool_calls``, ``content_filter``, …"""

    reason: str


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last item of a stream: the whole answer (usage, timings, ids)."""

    response: LLMResponse


StreamItem = Union[ContentDelta, ReasoningDelta, RefusalDelta, ToolCallDelta, FinishDelta, StreamEnd]


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """The answer of ``embed``: one vector per input, in input order. ``model`` and
    ``source_name`` are ``None`` when every input came from the cache; the token counts are
    ``None`` when a batch reported no usage (``usage_source == "unavailable"``)."""

    vectors: list[list[float]] = field(default_factory=list)
    prompt_tokens: int | None = None
    total_tokens: int | None = None
    usage_source: str = "unavailable"
    model: str | None = None
    source_name: str | None = None
    upstream_batches: int = 0
    cached_inputs: int = 0
    attempts: int = 0
    latency_ms: int = 0
    cost: float | None = None
    call_id: str = ""
    scope: str = ""


@dataclass(frozen=True, slots=True)
class OcrTextResult:
    """The answer of ``recognize_text`` (``text`` is ``""`` for an image without text).
    OCR bills no tokens: usage is a measured zero."""

    text: str = ""
    source_name: str = ""
    model: str = ""
    latency_ms: int = 0
    attempts: int = 0
    call_id: str = ""
    scope: str = ""
    usage_source: str = "measured"

    @property
    def usage(self) -> Usage:
        return Usage(0, 0)


@dataclass(frozen=True, slots=True)
class OcrElement:
    """One layout block in reading order; ``bbox`` is ``(x0, y0, x1, y1)`` in page units."""

    type: str
    text: str
    bbox: tuple[float, float, float, float]
    page_index: int


@dataclass(frozen=True, slots=True)
class OcrPageSize:
    page_index: int
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class OcrLayoutResult:
    """The answer of ``parse_layout``; ``dropped_boxes`` counts elements whose box was
    non-finite, reversed or of zero area."""

    elements: tuple[OcrElement, ...] = ()
    page_sizes: tuple[OcrPageSize, ...] = ()
    dropped_boxes: int = 0
    source_name: str = ""
    model: str = ""
    latency_ms: int = 0
    attempts: int = 0
    call_id: str = ""
    scope: str = ""
    usage_source: str = "measured"

    @property
    def usage(self) -> Usage:
        return Usage(0, 0)
