"""Embeddings and OCR through the embedded gateway: exact vectors (the mock's are SHA-256
derived), usage and provenance; recognised text, the layout fixture's elements and page
sizes, and the OCR health probe."""

from __future__ import annotations

import hashlib

import pytest

from conftest import Mock, base
from polygateway import EmbeddingResult, GatewayClient, OcrElement, OcrLayoutResult, OcrPageSize, OcrTextResult, ResultInvalidError

PNG = b"\x89PNG\r\n\x1a\n\x00\x00"  # 10 bytes, sniffed as image/png


def mock_vector(text: str, dims: int = 8) -> list[float]:
    """The mock upstream's vector of `text` (host/src/mock/embeddings.rs)."""
    out: list[float] = []
    block = 0
    while len(out) < dims:
        digest = hashlib.sha256(text.encode() + block.to_bytes(4, "little")).digest()
        out.extend((b - 128.0) / 256.0 for b in digest[: dims - len(out)])
        block += 1
    return out


def embed_client(mock: Mock, scenario: str) -> GatewayClient:
    return GatewayClient.from_settings(
        base(
            "EMB",
            EMB__OPENAI__1__BASE_URL=mock.base_url(scenario),
            EMB__OPENAI__1__MODEL="text-embedding-3-small",
            EMB__OPENAI__1__API_KEY="sk-emb",
            EMB__OPENAI__1__MAX_BATCH=2,
        )
    )


def ocr_client(mock: Mock, scenario: str) -> GatewayClient:
    return GatewayClient.from_settings(
        base("OCR", OCR__MONKEYOCR__1__BASE_URL=mock.ocr_base_url(scenario), OCR__MONKEYOCR__1__MODEL="monkeyocr")
    )


async def test_embeddings_come_back_in_input_order_with_usage(mock: Mock, uid: str) -> None:
    async with embed_client(mock, uid) as client:
        r = await client.embed(["hello world", "second text here", "hello world", "x"])
    assert isinstance(r, EmbeddingResult)
    assert r.vectors == [mock_vector(t) for t in ["hello world", "second text here", "hello world", "x"]]
    # Repeats are sent once: three distinct texts in batches of at most two.
    assert (r.upstream_batches, r.attempts) == (2, 2)
    assert (r.prompt_tokens, r.total_tokens, r.usage_source) == (2 + 3 + 1, 6, "measured")
    assert (r.model, r.source_name, r.scope, r.cached_inputs) == ("text-embedding-3-small", "openai-1", "EMB", 0)
    assert sorted(len(h["body"]["input"]) for h in mock.hits(uid)) == [1, 2]


async def test_embedding_dimensions_are_passed_through(mock: Mock, uid: str) -> None:
    async with embed_client(mock, uid) as client:
        r = await client.embed("one", dimensions=40)
    assert r.vectors == [mock_vector("one", 40)]
    assert mock.hits(uid)[0]["body"]["dimensions"] == 40


async def test_recognize_text_returns_the_text_and_its_provenance(mock: Mock, uid: str) -> None:
    async with ocr_client(mock, uid) as client:
        r = await client.recognize_text(PNG)
    assert isinstance(r, OcrTextResult)
    assert (r.text, r.source_name, r.model, r.attempts, r.scope) == ("Recognised text of 10 bytes", "monkeyocr-1", "monkeyocr", 1, "OCR")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage_source) == (0, 0, "measured")
    files = mock.hits(uid)[0]["multipart"]["files"]
    assert [(f["field"], f["file_name"], f["content_type"], f["size"]) for f in files] == [("file", "image.png", "image/png", 10)]


async def test_parse_layout_returns_elements_and_page_sizes(mock: Mock, uid: str) -> None:
    async with ocr_client(mock, uid) as client:
        r = await client.parse_layout(PNG, file_name="report.png")
    assert isinstance(r, OcrLayoutResult)
    assert [(e.type, e.page_index, e.bbox) for e in r.elements] == [
        ("title", 0, (72.0, 64.5, 540.0, 96.0)),
        ("text", 0, (72.0, 112.0, 540.0, 160.0)),
        ("table", 0, (72.0, 180.0, 540.0, 300.25)),
        ("image", 1, (100.0, 80.0, 495.0, 380.0)),
        ("text", 1, (100.0, 400.0, 495.0, 430.0)),
    ]
    assert r.elements[0] == OcrElement("title", "Quarterly Report", (72.0, 64.5, 540.0, 96.0), 0)
    assert r.elements[1].text == "Revenue grew in every region.\nCosts stayed flat."
    assert r.page_sizes == (OcrPageSize(0, 612.0, 792.0), OcrPageSize(1, 595.0, 842.0))
    assert (r.dropped_boxes, r.source_name, r.attempts) == (0, "monkeyocr-1", 1)


async def test_an_unreadable_archive_is_result_invalid(mock: Mock, uid: str) -> None:
    mock.script(uid, {"then": {"layout": "not_zip"}})
    async with ocr_client(mock, uid) as client:
        with pytest.raises(ResultInvalidError) as caught:
            await client.parse_layout(PNG)
    assert caught.value.source_name == "monkeyocr-1"
    # The upload and its archive's download, once: a bad result is not a bad service.
    assert [h["path"].rsplit("/", 1)[-1].split(".")[-1] for h in mock.hits(uid)] == ["parse", "zip"]


async def test_check_ocr_health_probes_every_ocr_source(mock: Mock, uid: str) -> None:
    async with ocr_client(mock, uid) as client:
        assert await client.check_ocr_health() == {"OCR": {"monkeyocr-1": True}}
        mock.set_health(uid, 503)
        assert await client.check_ocr_health() == {"OCR": {"monkeyocr-1": False}}
