"""A two-turn tool conversation through a PolyGateway proxy with the official OpenAI Python
SDK, handing the first turn's reasoning back the way clients of OpenRouter and LiteLLM do:
the assistant message of turn 1 goes back with its `reasoning_details` as the gateway
returned them (non-streamed: `message.reasoning_details`; streamed: the entries of the
chunks' `delta.reasoning_details`, joined in order). Turn 1 carries an image part.

Usage: sdk_reasoning_turns.py BASE_URL MODEL stream|nonstream
Prints one JSON object: turn1 {content, reasoning_content, reasoning_details, tool_calls,
finish_reason, usage} and turn2 {content, finish_reason}.
"""
import json
import sys

from openai import OpenAI

PIXEL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]


def extra(obj, key):
    return (getattr(obj, "model_extra", None) or {}).get(key)


def turn(client, model, messages, stream):
    if not stream:
        resp = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        choice = resp.choices[0]
        msg = choice.message
        return {
            "content": msg.content,
            "reasoning_content": extra(msg, "reasoning_content"),
            "reasoning_details": extra(msg, "reasoning_details") or [],
            "tool_calls": [
                {"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
                for t in (msg.tool_calls or [])
            ],
            "finish_reason": choice.finish_reason,
            "usage": resp.usage.model_dump() if resp.usage else None,
        }
    out = {"content": None, "reasoning_content": None, "reasoning_details": [],
           "tool_calls": [], "finish_reason": None, "usage": None}
    calls = {}
    for chunk in client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.usage:
            out["usage"] = chunk.usage.model_dump()
        for choice in chunk.choices:
            d = choice.delta
            if d.content:
                out["content"] = (out["content"] or "") + d.content
            r = extra(d, "reasoning_content")
            if r:
                out["reasoning_content"] = (out["reasoning_content"] or "") + r
            out["reasoning_details"] += extra(d, "reasoning_details") or []
            for t in d.tool_calls or []:
                c = calls.setdefault(t.index, {"id": None, "name": None, "arguments": ""})
                c["id"] = c["id"] or t.id
                if t.function and t.function.name:
                    c["name"] = t.function.name
                if t.function and t.function.arguments:
                    c["arguments"] += t.function.arguments
            if choice.finish_reason:
                out["finish_reason"] = choice.finish_reason
    out["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


def main() -> None:
    base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    stream = mode == "stream"
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    user = {"role": "user", "content": [
        {"type": "text", "text": "What is the weather in Paris?"},
        {"type": "image_url", "image_url": {"url": PIXEL}},
    ]}
    first = turn(client, model, [user], stream)
    assistant = {
        "role": "assistant",
        "content": first["content"],
        "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in first["tool_calls"]
        ],
        "reasoning_details": first["reasoning_details"],
    }
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "sunny, 21 C"}
               for c in first["tool_calls"]]
    second = turn(client, model, [user, assistant] + results, stream)
    print(json.dumps({"turn1": first, "turn2": {"content": second["content"],
                                                 "finish_reason": second["finish_reason"]}}))


if __name__ == "__main__":
    main()
