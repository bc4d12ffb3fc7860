"""Drive a PolyGateway proxy's /v1/embeddings with the official OpenAI Python SDK, unchanged.

Usage: sdk_embeddings.py BASE_URL MODEL float|default TEXT...
       sdk_embeddings.py BASE_URL MODEL float|default --tokens JSON
`default` lets the SDK pick the encoding (it asks for base64 and decodes it itself).
`--tokens` sends JSON (token ids, e.g. `[[15339], [1917, 3]]`) as `input`, as LangChain's
`OpenAIEmbeddings` does.
Prints one JSON object: embeddings (lists of floats), usage, model.
"""
import json
import sys

from openai import OpenAI


def main() -> None:
    base_url, model, mode, texts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    inputs = json.loads(texts[1]) if texts[:1] == ["--tokens"] else texts
    client = OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    kwargs = {"encoding_format": "float"} if mode == "float" else {}
    r = client.embeddings.create(model=model, input=inputs, **kwargs)
    print(json.dumps({
        "embeddings": [list(map(float, d.embedding)) for d in r.data],
        "indices": [d.index for d in r.data],
        "usage": r.usage.model_dump() if r.usage is not None else None,
        "model": r.model,
    }))


if __name__ == "__main__":
    main()
