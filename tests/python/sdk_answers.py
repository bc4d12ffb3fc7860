"""Read valid answers with no text through a PolyGateway proxy with the official OpenAI Python
SDK, unchanged: a refusal (`message.refusal`, `delta.refusal`), and the fields the gateway
carries from the upstream (`logprobs`, `system_fingerprint`, `service_tier`).

Usage: sdk_answers.py BASE_URL MODEL stream|nonstream
Prints one JSON object: content, refusal, finish_reason, system_fingerprint, service_tier,
logprobs (choice 0's, as the SDK parsed them; the streamed tokens joined), chunks.
"""
import json
import sys

from openai import OpenAI


def main() -> None:
    base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "tell me something you must refuse"}]
    if mode == "stream":
        stream = client.chat.completions.create(
            model=model, messages=messages, stream=True, logprobs=True, top_logprobs=1
        )
        content, refusal, finish, fingerprint, tier, tokens, chunks = None, None, None, None, None, [], 0
        for chunk in stream:
            chunks += 1
            fingerprint = chunk.system_fingerprint or fingerprint
            tier = chunk.service_tier or tier
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    content = (content or "") + delta.content
                if delta.refusal:
                    refusal = (refusal or "") + delta.refusal
                if choice.logprobs is not None:
                    tokens += [t.model_dump() for t in (choice.logprobs.content or [])]
                    tokens += [t.model_dump() for t in (choice.logprobs.refusal or [])]
                if choice.finish_reason:
                    finish = choice.finish_reason
        out = {"content": content, "refusal": refusal, "finish_reason": finish,
               "system_fingerprint": fingerprint, "service_tier": tier,
               "logprobs": tokens, "chunks": chunks}
    else:
        resp = client.chat.completions.create(
            model=model, messages=messages, logprobs=True, top_logprobs=1
        )
        choice = resp.choices[0]
        logprobs = choice.logprobs
        tokens = []
        if logprobs is not None:
            tokens = [t.model_dump() for t in (logprobs.content or [])]
            tokens += [t.model_dump() for t in (logprobs.refusal or [])]
        out = {"content": choice.message.content, "refusal": choice.message.refusal,
               "finish_reason": choice.finish_reason,
               "system_fingerprint": resp.system_fingerprint, "service_tier": resp.service_tier,
               "logprobs": tokens, "chunks": 0}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
