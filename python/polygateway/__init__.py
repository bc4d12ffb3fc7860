"""PolyGateway embedded in Python: one governed model call per ``await client.chat(...)``.

    client = GatewayClient.from_env()
    resp = await client.chat([{"role": "user", "content": "Hello"}])

The gateway itself — source selection, circuit breakers, rate limits, retries and failover,
the stream watchdog, the response cache, structured output, telemetry, the WebAssembly
provider plugins — is the Rust ``polygateway`` crate, compiled into ``polygateway._native``.
"""

from ._client import ChatStream, GatewayClient
from ._native import __version__
from ._types import (
    ContentDelta,
    EmbeddingResult,
    FinishDelta,
    LLMResponse,
    OcrElement,
    OcrLayoutResult,
    OcrPageSize,
    OcrTextResult,
    ReasoningDelta,
    RefusalDelta,
    StreamEnd,
    StreamItem,
    StreamStart,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from .errors import (
    AllSourcesExhausted,
    CallDeadlineExceeded,
    CircuitOpenError,
    ClientClosedError,
    ConfigError,
    GatewayUnavailableError,
    GovernanceBackendError,
    InvalidRequestError,
    PluginFaultError,
    PolyGatewayError,
    RequestRejectedError,
    ResultInvalidError,
    SourceDeadError,
    StreamInterruptedError,
    TransientError,
)

__all__ = [
    "__version__",
    "GatewayClient",
    "ChatStream",
    "LLMResponse",
    "Usage",
    "ToolCall",
    "StreamStart",
    "StreamItem",
    "ContentDelta",
    "ReasoningDelta",
    "RefusalDelta",
    "ToolCallDelta",
    "FinishDelta",
    "StreamEnd",
    "EmbeddingResult",
    "OcrTextResult",
    "OcrLayoutResult",
    "OcrElement",
    "OcrPageSize",
    "PolyGatewayError",
    "TransientError",
    "StreamInterruptedError",
    "SourceDeadError",
    "RequestRejectedError",
    "InvalidRequestError",
    "ResultInvalidError",
    "GatewayUnavailableError",
    "AllSourcesExhausted",
    "CircuitOpenError",
    "GovernanceBackendError",
    "CallDeadlineExceeded",
    "PluginFaultError",
    "ConfigError",
    "ClientClosedError",
]
