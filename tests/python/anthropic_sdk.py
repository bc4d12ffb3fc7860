"""The official Anthropic Python SDK against a PolyGateway proxy's `/v1/messages`.

Usage: anthropic_sdk.py BASE_URL MODEL MODE [ARG]
Modes (each prints one JSON object):
- text: `messages.create`; the message as the SDK parsed it.
- stream: `messages.stream`; the `text_stream` pieces and `get_final_message()`.
- turns stream|nonstream: a two-turn tool conversation with thinking on and an image in
  turn 1; turn 2 hands turn 1's content blocks back unchanged (thinking with its signature,
  text, tool_use) with a `tool_result`. Prints turn1 and turn2 messages.
- error: one `messages.create` expected to fail; the exception class, status, parsed body
  and headers the SDK's users read.
"""
import json
import sys

import anthropic

PIXEL_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
TOOLS = [{
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}]


def dump(message):
    """The message as the SDK parsed it: the fields it received (not its defaults for those
    it did not), so a missing field is as visible as a wrong one."""
    return message.model_dump(mode="json", exclude_unset=True)


def turn(client, model, messages, stream):
    kwargs = dict(model=model, max_tokens=2048, messages=messages, tools=TOOLS,
                  thinking={"type": "enabled", "budget_tokens": 1024})
    if not stream:
        return dump(client.messages.create(**kwargs)), None
    with client.messages.stream(**kwargs) as s:
        events = [e.type for e in s]
        return dump(s.get_final_message()), events


def main():
    base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    client = anthropic.Anthropic(base_url=base_url, api_key="sk-test", max_retries=0)
    if mode == "text":
        msg = client.messages.create(
            model=model, max_tokens=64, system="Be brief.",
            messages=[{"role": "user", "content": "Say hello"}])
        print(json.dumps(dump(msg)))
    elif mode == "stream":
        with client.messages.stream(
                model=model, max_tokens=64,
                messages=[{"role": "user", "content": "Say hello"}]) as s:
            pieces = list(s.text_stream)
            final = s.get_final_message()
        print(json.dumps({"pieces": pieces, "final": dump(final)}))
    elif mode == "turns":
        stream = sys.argv[4] == "stream"
        first = [{"role": "user", "content": [
            {"type": "text", "text": "What is the weather in Paris?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PIXEL_B64}},
        ]}]
        t1, events1 = turn(client, model, first, stream)
        tool = next(b for b in t1["content"] if b["type"] == "tool_use")
        second = first + [
            {"role": "assistant", "content": t1["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool["id"], "content": "Sunny, 24 C"}]},
        ]
        t2, events2 = turn(client, model, second, stream)
        print(json.dumps({"turn1": t1, "turn2": t2, "events1": events1, "events2": events2}))
    elif mode == "error":
        try:
            client.messages.create(model=model, max_tokens=64,
                                   messages=[{"role": "user", "content": "hi"}])
            print(json.dumps({"class": None}))
        except anthropic.APIStatusError as e:
            print(json.dumps({
                "class": type(e).__name__,
                "rate_limit_error": isinstance(e, anthropic.RateLimitError),
                "status": e.status_code,
                "body": e.body,
                "retry_after": e.response.headers.get("retry-after"),
                "should_retry": e.response.headers.get("x-should-retry"),
            }))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
