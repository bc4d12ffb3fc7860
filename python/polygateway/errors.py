"""The exception tree of the package, after the reference's error model.

``PolyGatewayError`` is the root. A call's failure classes — ``TransientError``,
``SourceDeadError``, ``RequestRejectedError``, ``ResultInvalidError`` — are what each
*attempt* can end with; the gateway's retry loop absorbs the first two by backing off and
failing over, so a call raises them only as described on each class. When no source can
serve the call the scope is unavailable: ``GatewayUnavailableError`` and its subclasses carry
``retry_after_s``, ``reason`` and ``per_source_reasons``.

The Rust binding builds every instance through ``_from_native``; the mapping from the
gateway's error kinds to these classes is written there, once.
"""

from __future__ import annotations

from typing import Any

__all__ = [
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


class PolyGatewayError(Exception):
    """Root of every error the package raises. ``kind`` is the gateway's error kind (the
    telemetry ``error_type``: ``scope_unavailable``, ``deadline_exceeded``, …)."""

    kind: str = "internal"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for name, value in fields.items():
            setattr(self, name, value)


class TransientError(PolyGatewayError):
    """A passing failure (timeout, 5xx, 429, broken stream). The retry loop backs off and
    fails over on these; a call raises one only as ``StreamInterruptedError``."""


class StreamInterruptedError(TransientError):
    """A streamed answer broke after output reached the caller: what was received is
    incomplete. Retrying the call is safe. ``source_name`` names the source."""

    source_name: str


class SourceDeadError(PolyGatewayError):
    """A source is dead (401/403, no quota): the retry loop opens its breaker and fails over
    at once. A call never raises it: a scope whose every source is dead raises
    ``AllSourcesExhausted`` with ``per_source_reasons`` values ``"source_dead"``."""


class RequestRejectedError(PolyGatewayError):
    """The request was refused (the upstream's 400-class answer): not retried, no failover.
    ``source_name``, ``status`` and ``code`` say who refused it and how."""

    source_name: str | None = None
    status: int | None = None
    code: str | None = None


class InvalidRequestError(RequestRejectedError, ValueError):
    """The gateway refused the request before any upstream call; ``param`` names the bad
    argument (``messages[0].role``, ``model``, ``deadline_s``, ``tenant_id`` …)."""

    param: str | None = None


class ResultInvalidError(PolyGatewayError):
    """A healthy service returned an unusable result (structured output that could not be
    repaired or validated, an unreadable OCR archive). When the structured-output ladder gave
    up: ``strategy``, ``raw_text``, ``repair_error``, ``validation_errors``, ``reasks``."""

    source_name: str | None = None
    strategy: str | None = None
    raw_text: str | None = None
    repair_error: str | None = None
    validation_errors: list[str] | None = None
    reasks: int | None = None


class GatewayUnavailableError(PolyGatewayError):
    """The scope could not serve the call. ``retry_after_s``: seconds until a retry is known
    to make sense (0 = now or unknown); ``reason``: ``circuit_open``, ``retry_exhausted``,
    ``stalled``, ``quota_exhausted``, ``rate_limited``, ``no_sources`` or
    ``governance_backend_down``; ``per_source_reasons``: source name → why it failed."""

    scope: str = ""
    reason: str = ""
    retry_after_s: float = 0.0
    per_source_reasons: dict[str, str]


class AllSourcesExhausted(GatewayUnavailableError):
    """Every source of the scope failed, is excluded or is over its limits."""


class CircuitOpenError(AllSourcesExhausted):
    """Every eligible source's breaker is open (``reason == "circuit_open"``);
    ``retry_after_s`` is the soonest end of a cooldown."""


class GovernanceBackendError(GatewayUnavailableError):
    """The shared state store (Redis) of the limiter or breaker did not answer: admission
    fails closed (``reason == "governance_backend_down"``)."""


class CallDeadlineExceeded(PolyGatewayError, TimeoutError):
    """The call's deadline (``deadline_s`` or ``{SCOPE}__CALL_DEADLINE_S``) passed; the
    attempt in flight was cancelled. ``deadline_s`` is the deadline."""

    deadline_s: float


class PluginFaultError(PolyGatewayError):
    """A provider component trapped or ran out of its budget; ``plugin`` names it."""

    plugin: str = ""


class ConfigError(PolyGatewayError):
    """The gateway refused to start. ``problems`` lists every problem as ``(key, message)``
    — the env key (or file) at fault — in one run; ``keys`` is just the keys."""

    problems: list[tuple[str, str]]

    @property
    def keys(self) -> list[str]:
        return [key for key, _ in self.problems]


class ClientClosedError(PolyGatewayError):
    """The client was closed with ``aclose()``."""

    kind = "closed"


_BY_KIND: dict[str, type[PolyGatewayError]] = {
    "invalid_request": InvalidRequestError,
    "model_not_found": InvalidRequestError,
    "request_rejected": RequestRejectedError,
    "result_invalid": ResultInvalidError,
    "plugin_fault": PluginFaultError,
    "deadline_exceeded": CallDeadlineExceeded,
    "stream_interrupted": StreamInterruptedError,
    # Only a virtual key (the proxy's) can be refused these; kept for completeness.
    "model_not_allowed": RequestRejectedError,
    "key_rate_limited": GatewayUnavailableError,
    "budget_exceeded": GatewayUnavailableError,
    "config": ConfigError,
    "closed": ClientClosedError,
    "internal": PolyGatewayError,
}


def _from_native(kind: str, message: str, fields: dict[str, Any]) -> PolyGatewayError:
    """The exception of the gateway's error ``kind`` (called by the Rust binding)."""
    if kind == "scope_unavailable":
        reason = fields.get("reason", "")
        cls: type[PolyGatewayError]
        if reason == "governance_backend_down":
            cls = GovernanceBackendError
        elif reason == "circuit_open":
            cls = CircuitOpenError
        else:
            cls = AllSourcesExhausted
    else:
        cls = _BY_KIND.get(kind, PolyGatewayError)
    exc = cls(message, **fields)
    exc.kind = kind
    return exc
