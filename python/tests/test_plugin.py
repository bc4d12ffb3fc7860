"""A provider component loaded from a `.wasm` file (the released contract-0.1 `openai`
component of tests/fixtures/) serves calls through the Python package."""

from __future__ import annotations

import hashlib

from conftest import REPO, Mock, base, source
from polygateway import ContentDelta, GatewayClient, StreamEnd

WASM = REPO / "tests" / "fixtures" / "contract-0.1" / "openai.wasm"


async def test_a_wasm_provider_from_a_file_serves_chat(mock: Mock, uid: str) -> None:
    mock.script(uid, {"then": {"content": "via the file"}})
    digest = hashlib.sha256(WASM.read_bytes()).hexdigest()
    keys = base(**source(mock, "LLM", "acme", 1, uid, "acme-model", plugin=str(WASM), plugin_sha256=digest))
    async with GatewayClient.from_settings(keys) as client:
        [src] = client.health()["scopes"]["LLM"]["sources"]
        assert (src["name"], src["provider"], src["plugin"]) == ("acme-1", "acme", "openai")
        assert str(WASM) in str(src["plugin_origin"])
        resp = await client.chat([{"role": "user", "content": "hi"}])
        assert (resp.content, resp.source_name, resp.provider) == ("via the file", "acme-1", "acme")
        items = [i async for i in await client.chat([{"role": "user", "content": "hi"}], stream=True)]
    assert items[0] == ContentDelta("via ")
    assert isinstance(items[-1], StreamEnd) and items[-1].response.content == "via the file"
    assert mock.hits(uid)[0]["authorization"] == f"Bearer sk-{uid}"
