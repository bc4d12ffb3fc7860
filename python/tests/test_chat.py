"""Chat through the embedded gateway against the mock upstream: answers with reasoning
(collected and streamed), failover, scope unavailability, deadlines, cancellation releasing
the limiter, structured output, the response cache and the sync facade."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

from conftest import Mock, base, eventually, redis_keys, source
from polygateway import (
    AllSourcesExhausted,
    CallDeadlineExceeded,
    ChatStream,
    CircuitOpenError,
    ClientClosedError,
    ContentDelta,
    FinishDelta,
    GatewayClient,
    GatewayUnavailableError,
    InvalidRequestError,
    LLMResponse,
    PolyGatewayError,
    ReasoningDelta,
    RequestRejectedError,
    ResultInvalidError,
    StreamEnd,
    Usage,
)

HELLO = [{"role": "user", "content": "say hello to the test"}]


def client_on(mock: Mock, uid: str, script: dict | None = None, provider: str = "deepseek", model: str = "deepseek-reasoner", **extra: object) -> GatewayClient:
    if script is not None:
        mock.script(uid, script)
    return GatewayClient.from_settings(base(**source(mock, "LLM", provider, 1, uid, model), **extra))


async def test_a_collected_answer_carries_reasoning_usage_and_provenance(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {"then": {"content": "a b", "reasoning": "think"}}) as client:
        resp = await client.chat(HELLO)
    assert isinstance(resp, LLMResponse)
    assert resp.content == "a b"
    assert resp.reasoning == "think"
    assert resp.thinking == "think"
    assert resp.source_name == "deepseek-1"
    assert resp.source == "deepseek-1"
    assert resp.provider == "deepseek"
    assert resp.model == "deepseek-reasoner"
    assert resp.model_reported == "deepseek-reasoner"
    assert resp.scope == "LLM"
    assert resp.attempts == 1
    assert resp.cache_hit is False
    assert resp.finish_reason == "stop"
    assert resp.usage == Usage(prompt_tokens=5, completion_tokens=3, reasoning_tokens=1)
    assert (resp.prompt_tokens, resp.completion_tokens) == (5, 3)
    assert resp.usage_source == "measured"
    assert resp.cost is None  # no PGW_PRICING_FILE
    assert resp.tool_calls == ()
    assert resp.structured is None
    assert resp.ttft_ms is not None and resp.ttft_ms >= 0.0
    assert len(resp.call_id) == 36


async def test_a_stream_yields_typed_deltas_then_the_whole_answer(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {"then": {"content": "a b", "reasoning": "think"}}) as client:
        stream = await client.chat(HELLO, stream=True)
        assert isinstance(stream, ChatStream)
        assert (stream.source_name, stream.attempts, stream.cache_hit) == ("deepseek-1", 1, False)
        items = [item async for item in stream]
    assert items[:-1] == [
        ReasoningDelta("think"),
        ContentDelta("a "),
        ContentDelta("b"),
        FinishDelta("stop"),
    ]
    end = items[-1]
    assert isinstance(end, StreamEnd)
    assert end.response is stream.response
    assert (end.response.content, end.response.reasoning) == ("a b", "think")
    assert end.response.call_id == stream.call_id
    assert end.response.usage == Usage(prompt_tokens=5, completion_tokens=3, reasoning_tokens=1)


async def test_a_failed_source_fails_over_to_the_second(mock: Mock, uid: str) -> None:
    mock.script(f"{uid}-a", {"steps": [{"status": 503}]})
    keys = base(
        **source(mock, "LLM", "openai", 1, f"{uid}-a", "gpt-x"),
        **source(mock, "LLM", "qwen", 2, f"{uid}-b", "qwen-plus"),
    )
    async with GatewayClient.from_settings(keys) as client:
        resp = await client.chat(HELLO)
        assert (resp.attempts, resp.source_name, resp.model) == (2, "qwen-2", "qwen-plus")
        assert resp.content == "Hello from the mock upstream."
    # Streamed too (a fresh gateway: first call, first source): the failover happens
    # before the stream commits.
    mock.script(f"{uid}-a", {"steps": [{"status": 503}]})
    async with GatewayClient.from_settings(keys) as client:
        stream = await client.chat(HELLO, stream=True)
        assert (stream.attempts, stream.source_name) == (2, "qwen-2")
        resp = await stream.collect()
        assert (resp.attempts, resp.source_name) == (2, "qwen-2")
    assert len(mock.hits(f"{uid}-a")) == 1  # the second call's 503 (scripting resets hits)
    assert len(mock.hits(f"{uid}-b")) == 2


async def test_all_sources_exhausted_carries_retry_after_reason_and_per_source_reasons(mock: Mock, uid: str) -> None:
    script = {"then": {"status": 429, "headers": {"Retry-After": "3600"}}}
    async with client_on(mock, uid, script, provider="openai", model="gpt-x") as client:
        with pytest.raises(AllSourcesExhausted) as caught:
            await client.chat(HELLO)
    e = caught.value
    assert isinstance(e, GatewayUnavailableError) and isinstance(e, PolyGatewayError)
    assert e.retry_after_s == 3600.0
    assert e.reason == "rate_limited"
    assert e.scope == "LLM"
    assert e.per_source_reasons == {"openai-1": "rate_limited"}
    assert e.kind == "scope_unavailable"


async def test_an_open_breaker_raises_circuit_open_with_its_cooldown(mock: Mock, uid: str) -> None:
    script = {"then": {"status": 401}}
    async with client_on(mock, uid, script, provider="openai", model="gpt-x", LLM__BREAKER__COOLDOWN_S=600) as client:
        with pytest.raises(AllSourcesExhausted) as first:
            await client.chat(HELLO)
        assert first.value.per_source_reasons == {"openai-1": "source_dead"}
        with pytest.raises(CircuitOpenError) as second:
            await client.chat(HELLO)
    assert second.value.reason == "circuit_open"
    assert 599.0 < second.value.retry_after_s <= 600.0
    assert len(mock.hits(uid)) == 1  # the open breaker sent nothing


async def test_a_deadline_raises_call_deadline_exceeded_and_cancels_the_upstream(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {"then": {"first_token_delay_ms": 5000}}) as client:
        with pytest.raises(CallDeadlineExceeded) as caught:
            await client.chat(HELLO, deadline_s=0.3)
        assert caught.value.deadline_s == 0.3
        assert isinstance(caught.value, TimeoutError)
        hits = await mock.wait_hits(uid, lambda h: len(h) == 1 and h[0].get("cancelled", False))
        assert [(h.get("completed", False), h.get("cancelled", False)) for h in hits] == [(False, True)]
        assert client.in_flight("LLM") == 0


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_cancelling_the_task_releases_the_limiter_and_the_upstream(mock: Mock, uid: str, backend: str, redis_up: None) -> None:
    extra: dict[str, object] = {"LLM__GLOBAL__MAX_CONCURRENCY": 1}
    if backend == "redis":
        extra.update(redis_keys(uid))
    async with client_on(mock, uid, {"steps": [{"first_token_delay_ms": 10_000}]}, **extra) as client:
        task = asyncio.create_task(client.chat(HELLO))
        assert await eventually(lambda: client.in_flight("LLM") == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await eventually(lambda: client.in_flight("LLM") == 0, timeout_s=2.0)
        hits = await mock.wait_hits(uid, lambda h: len(h) == 1 and h[0].get("cancelled", False))
        assert [(h.get("completed", False), h.get("cancelled", False)) for h in hits] == [(False, True)]
        # The one permit is free again: the next call goes through at once.
        resp = await client.chat(HELLO, deadline_s=5)
        assert resp.content == "Hello from the mock upstream."


async def test_cancelling_a_task_that_iterates_a_stream_cancels_the_call(mock: Mock, uid: str) -> None:
    script = {"steps": [{"content": "one two three four", "inter_chunk_delay_ms": 5000}]}
    async with client_on(mock, uid, script, LLM__GLOBAL__MAX_CONCURRENCY=1) as client:
        got: list[object] = []

        async def consume() -> None:
            stream = await client.chat(HELLO, stream=True)
            async for item in stream:
                got.append(item)

        task = asyncio.create_task(consume())
        assert await eventually(lambda: len(got) >= 1)
        assert client.in_flight("LLM") == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await eventually(lambda: client.in_flight("LLM") == 0, timeout_s=2.0)
        assert got == [ContentDelta("one ")]
        hits = await mock.wait_hits(uid, lambda h: len(h) == 1 and h[0].get("cancelled", False))
        assert hits[0].get("cancelled") is True


async def test_structured_output_returns_the_parsed_value(mock: Mock, uid: str) -> None:
    class Person(pydantic.BaseModel):
        name: str
        age: int

    # A fenced answer with a trailing comma: repaired, validated, parsed.
    answer = '```json\n{"name": "Ada", "age": 36,}\n```'
    async with client_on(mock, uid, {"then": {"content": answer}}, provider="qwen", model="qwen-plus") as client:
        resp = await client.chat(HELLO, structured=Person)
        assert resp.structured == {"name": "Ada", "age": 36}
        assert resp.structured_data == Person(name="Ada", age=36)
        assert resp.content == '{"age":36,"name":"Ada"}'
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        resp = await client.chat(HELLO, structured=schema)
        assert resp.structured == resp.structured_data == {"name": "Ada", "age": 36}
        resp = await client.chat(HELLO, structured="json")
        assert resp.structured == {"name": "Ada", "age": 36}
        stream = await client.chat(HELLO, structured=Person, stream=True)
        assert (await stream.collect()).structured_data == Person(name="Ada", age=36)


async def test_structured_output_that_cannot_be_repaired_raises_result_invalid(mock: Mock, uid: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    async with client_on(mock, uid, {"then": {"content": '{"n": "x"}'}}, provider="qwen", model="qwen-plus") as client:
        with pytest.raises(ResultInvalidError) as caught:
            await client.chat(HELLO, structured=schema)
    e = caught.value
    assert (e.strategy, e.raw_text, e.reasks) == ("json-repair", '{"n": "x"}', 1)
    assert e.repair_error is None
    assert e.validation_errors == ['/n: "x" is not of type "integer"']
    assert len(mock.hits(uid)) == 2  # the answer and one re-ask


async def test_sampling_parameters_reach_the_upstream(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {}, provider="openai", model="gpt-x") as client:
        await client.chat(HELLO, temperature=0.25, max_tokens=7, seed=3)
    body = mock.hits(uid)[0]["body"]
    assert (body["temperature"], body["max_tokens"], body["seed"], body["model"]) == (0.25, 7, 3, "gpt-x")


async def test_the_response_cache_in_redis_serves_a_repeat_without_the_upstream(mock: Mock, uid: str, redis_up: None) -> None:
    extra = {**redis_keys(uid), "PGW_CACHE_BACKEND": "redis", "LLM__CACHE__TTL_S": 60}
    async with client_on(mock, uid, {"then": {"content": "cached once", "reasoning": "r"}}, **extra) as client:
        first = await client.chat(HELLO, cache_namespace="t1")
        second = await client.chat(HELLO, cache_namespace="t1")
        other = await client.chat(HELLO, cache_namespace="t2")
        salted = await client.chat(HELLO, cache_namespace="t1", cache_salt="epoch-2")
    assert (first.cache_hit, first.attempts) == (False, 1)
    assert (second.cache_hit, second.attempts, second.content, second.reasoning) == (True, 0, "cached once", "r")
    assert (other.cache_hit, salted.cache_hit) == (False, False)
    assert len(mock.hits(uid)) == 3


async def test_bad_arguments_raise_invalid_request_naming_the_parameter(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {}) as client:
        cases = [
            (lambda: client.chat([{"content": "no role"}]), "messages[0].role"),
            (lambda: client.chat([]), "messages"),
            (lambda: client.chat(HELLO, model="nope"), "model"),
            (lambda: client.chat(HELLO, deadline_s=0), "deadline_s"),
            (lambda: client.chat(HELLO, tenant_id=" t1"), "tenant_id"),
            (lambda: client.chat(HELLO, cache="sometimes"), "cache"),
            (lambda: client.chat(HELLO, stream_options={}), "stream_options"),
        ]
        for call, param in cases:
            with pytest.raises(InvalidRequestError) as caught:
                await call()
            assert caught.value.param == param
            assert isinstance(caught.value, RequestRejectedError) and isinstance(caught.value, ValueError)
    assert mock.hits(uid) == []


async def test_an_upstream_400_raises_request_rejected(mock: Mock, uid: str) -> None:
    async with client_on(mock, uid, {"then": {"status": 400}}, provider="openai", model="gpt-x") as client:
        with pytest.raises(RequestRejectedError) as caught:
            await client.chat(HELLO)
    assert (caught.value.source_name, caught.value.status) == ("openai-1", 400)
    assert len(mock.hits(uid)) == 1


def test_chat_sync_blocks_and_returns_the_answer(mock: Mock, uid: str) -> None:
    client = client_on(mock, uid, {"then": {"content": "from a script"}})
    resp = client.chat_sync(HELLO)
    assert (resp.content, resp.attempts, resp.source_name) == ("from a script", 1, "deepseek-1")


async def test_a_closed_client_refuses_calls(mock: Mock, uid: str) -> None:
    client = client_on(mock, uid, {})
    await client.aclose()
    await client.aclose()  # idempotent
    with pytest.raises(ClientClosedError):
        await client.chat(HELLO)
