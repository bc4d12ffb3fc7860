"""Drive a PolyGateway proxy with the official OpenAI Python SDK, unchanged.

Usage: sdk_chat.py BASE_URL MODEL stream|nonstream
Prints one JSON object: content, reasoning, finish_reason, usage, model, chunks.
"""
import json
import sys

from openai import OpenAI


def main() -> None:
    base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "say hello to the test"}]
    if mode == "stream":
        stream = client.chat.completions.create(
            model=model, messages=messages, stream=True, stream_options={"include_usage": True}
        )
        content, reasoning, finish, usage, chunk_model, chunks = "", "", None, None, None, 0
        for chunk in stream:
            chunks += 1
            chunk_model = chunk.model
            if chunk.usage is not None:
                usage = chunk.usage.model_dump(exclude_none=True)
            for choice in chunk.choices:
                delta = choice.delta
                content += delta.content or ""
                reasoning += getattr(delta, "reasoning_content", None) or ""
                if choice.finish_reason:
                    finish = choice.finish_reason
        out = {"content": content, "reasoning": reasoning, "finish_reason": finish,
               "usage": usage, "model": chunk_model, "chunks": chunks}
    else:
        resp = client.chat.completions.create(model=model, messages=messages)
        msg = resp.choices[0].message
        out = {"content": msg.content, "reasoning": getattr(msg, "reasoning_content", None) or "",
               "finish_reason": resp.choices[0].finish_reason,
               "usage": resp.usage.model_dump(exclude_none=True) if resp.usage else None,
               "model": resp.model, "chunks": 0}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
