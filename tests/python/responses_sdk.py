"""The OpenAI Responses API through PolyGateway with the official OpenAI Python SDK, unchanged.

Usage: responses_sdk.py BASE_URL MODEL CASE [stream|nonstream]
CASE:
  text       `responses.create` (nonstream) then `responses.stream` (text deltas,
             `get_final_response()`), with instructions, max_output_tokens and temperature.
  parse      `responses.parse(text_format=Person)` (a strict json_schema `text.format`).
  tools      a function-calling round trip: turn 1 answers with function calls, turn 2 hands
             back the output items and a `function_call_output` for each call.
  reasoning  two turns: turn 1's output (its reasoning item) handed back in turn 2's input.
  ratelimit  a call on a rate-limited scope: the exception raised.
Prints one JSON object describing what the SDK returned.
"""
import json
import sys

import openai
from openai import OpenAI
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Get the weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]


def usage(u):
    return None if u is None else u.model_dump(exclude_none=True)


def summary(resp):
    """What the Response says, as plain JSON."""
    items = []
    for item in resp.output:
        d = item.model_dump(exclude_none=True)
        # The stream helper's parsed views, not part of the wire object.
        d.pop("parsed", None)
        d.pop("parsed_arguments", None)
        for c in d.get("content", []) or []:
            c.pop("parsed", None)
        items.append(d)
    return {
        "id": resp.id,
        "object": resp.object,
        "status": resp.status,
        "model": resp.model,
        "output_text": resp.output_text,
        "output": items,
        "usage": usage(resp.usage),
        "incomplete_details": None
        if resp.incomplete_details is None
        else resp.incomplete_details.model_dump(),
        "instructions": resp.instructions,
        "max_output_tokens": resp.max_output_tokens,
        "temperature": resp.temperature,
        "tool_choice": resp.tool_choice,
        "parallel_tool_calls": resp.parallel_tool_calls,
    }


def streamed(client, **kwargs):
    """`responses.stream`: the event types and text deltas seen, and the final response."""
    types, deltas, seqs = [], [], []
    with client.responses.stream(**kwargs) as stream:
        for event in stream:
            types.append(event.type)
            seqs.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    return {"types": types, "deltas": deltas, "sequence_numbers": seqs, "final": final}


def create(client, mode, **kwargs):
    if mode == "stream":
        return streamed(client, **kwargs)["final"]
    return client.responses.create(**kwargs)


def case_text(client, model):
    kwargs = dict(
        model=model,
        instructions="Be brief.",
        input="say hello to the test",
        max_output_tokens=64,
        temperature=0.2,
    )
    whole = client.responses.create(**kwargs)
    s = streamed(client, **kwargs)
    return {
        "nonstream": summary(whole),
        "stream": summary(s["final"]),
        "types": s["types"],
        "deltas": s["deltas"],
        "sequence_numbers": s["sequence_numbers"],
    }


def case_parse(client, model):
    resp = client.responses.parse(
        model=model,
        input="Describe Ada Lovelace as a person.",
        text_format=Person,
    )
    return {
        "parsed": resp.output_parsed.model_dump() if resp.output_parsed else None,
        "output_text": resp.output_text,
    }


def case_tools(client, model, mode):
    first_input = [{"role": "user", "content": "What is the weather in Paris and Rome?"}]
    turn1 = create(client, mode, model=model, input=first_input, tools=TOOLS)
    calls = [i for i in turn1.output if i.type == "function_call"]
    second_input = list(first_input) + list(turn1.output)
    for c in calls:
        city = json.loads(c.arguments)["city"]
        second_input.append(
            {"type": "function_call_output", "call_id": c.call_id, "output": f"sunny in {city}"}
        )
    turn2 = create(client, mode, model=model, input=second_input, tools=TOOLS)
    return {"turn1": summary(turn1), "turn2": summary(turn2)}


def case_reasoning(client, model, mode):
    first_input = [{"role": "user", "content": "say hello to the test"}]
    turn1 = create(client, mode, model=model, input=first_input, reasoning={"effort": "low"})
    second_input = list(first_input) + list(turn1.output)
    second_input.append({"role": "user", "content": "once more"})
    turn2 = create(client, mode, model=model, input=second_input)
    return {"turn1": summary(turn1), "turn2": summary(turn2)}


def case_ratelimit(client, model, mode):
    try:
        create(client, mode, model=model, input="say hello to the test")
        return {"raised": None}
    except openai.APIStatusError as e:
        return {
            "raised": type(e).__name__,
            "rate_limit_error": isinstance(e, openai.RateLimitError),
            "status": e.status_code,
            "code": e.code,
            "type": e.type,
            "should_retry": e.response.headers.get("x-should-retry"),
        }


def main() -> None:
    base_url, model, case = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "nonstream"
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=60.0)
    if case == "text":
        out = case_text(client, model)
    elif case == "parse":
        out = case_parse(client, model)
    elif case == "tools":
        out = case_tools(client, model, mode)
    elif case == "reasoning":
        out = case_reasoning(client, model, mode)
    elif case == "ratelimit":
        out = case_ratelimit(client, model, mode)
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
