"""Structured output through PolyGateway with the official OpenAI Python SDK, unchanged:
`client.chat.completions.parse` with a pydantic model (the SDK sends a strict json_schema
`response_format` and parses the answer's content into the model).

Usage: sdk_structured.py BASE_URL MODEL
Prints one JSON object: parsed (the model's fields), content (the raw message content),
refusal.
"""
import json
import sys

from openai import OpenAI
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int


def main() -> None:
    base_url, model = sys.argv[1], sys.argv[2]
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    resp = client.chat.completions.parse(
        model=model,
        messages=[{"role": "user", "content": "Describe Ada Lovelace as a person."}],
        response_format=Person,
    )
    msg = resp.choices[0].message
    out = {
        "parsed": msg.parsed.model_dump() if msg.parsed else None,
        "content": msg.content,
        "refusal": msg.refusal,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
