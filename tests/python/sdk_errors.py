"""Drive a failing PolyGateway call with the official OpenAI Python SDK at its defaults
(max_retries=2), to see which exception it raises and whether it retried on its own.

Usage: sdk_errors.py BASE_URL MODEL stream|nonstream [API_KEY]
Prints one JSON object: the exception class and whether it is an openai.RateLimitError, the
status, the error's code/type (as the SDK parsed them from the body), the Retry-After and
x-should-retry headers of the answer, and the seconds create() took.
"""
import json
import sys
import time

import openai
from openai import OpenAI


def main() -> None:
    base_url, model, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    api_key = sys.argv[4] if len(sys.argv) > 4 else "unused"
    # Default max_retries (2): the gateway's x-should-retry decides whether the SDK retries.
    # The timeout only bounds a hang; the Rust side asserts the real time bound.
    client = OpenAI(base_url=base_url + "/v1", api_key=api_key, timeout=30.0)
    assert client.max_retries == 2, client.max_retries
    messages = [{"role": "user", "content": "say hello to the test"}]
    started = time.monotonic()
    try:
        if mode == "stream":
            for _ in client.chat.completions.create(model=model, messages=messages, stream=True):
                pass
        else:
            client.chat.completions.create(model=model, messages=messages)
        out = {"raised": None}
    except openai.APIStatusError as e:
        out = {
            "raised": type(e).__name__,
            "rate_limit_error": isinstance(e, openai.RateLimitError),
            "status": e.status_code,
            "code": e.code,
            "type": e.type,
            "retry_after": e.response.headers.get("retry-after"),
            "should_retry": e.response.headers.get("x-should-retry"),
        }
    out["elapsed_s"] = time.monotonic() - started
    print(json.dumps(out))


if __name__ == "__main__":
    main()
