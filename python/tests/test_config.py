"""Start-up: `ConfigError` names every bad key in one run; `from_env` reads `.env` under the
process environment; a malformed `.env` is located without quoting its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Mock, base, source
from polygateway import ConfigError, GatewayClient, PolyGatewayError


def test_config_error_names_every_bad_key() -> None:
    with pytest.raises(ConfigError) as caught:
        GatewayClient.from_settings(
            {
                "LLM__OPENAI__1__BASE_URL": "api.openai.com",
                "LLM__OPENAI__1__RPM": "ten",
                "LLM__RETRY__MAX_ATTEMPTS": 0,
                "PGW_LISTN": "127.0.0.1:1",
            }
        )
    e = caught.value
    assert isinstance(e, PolyGatewayError)
    assert e.keys == [
        "LLM__OPENAI__1__BASE_URL",
        "LLM__OPENAI__1__MODEL",
        "LLM__OPENAI__1__RPM",
        "LLM__RETRY__MAX_ATTEMPTS",
        "PGW_LISTN",
    ]
    assert e.problems[0] == ("LLM__OPENAI__1__BASE_URL", "expected an http:// or https:// URL, got `api.openai.com`")
    assert e.problems[1] == ("LLM__OPENAI__1__MODEL", "required")
    assert e.problems[4] == ("PGW_LISTN", "unknown PGW_ key")
    assert str(e).startswith("invalid configuration:\n  LLM__OPENAI__1__BASE_URL: ")


def test_a_missing_plugin_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.wasm"
    with pytest.raises(ConfigError) as caught:
        GatewayClient.from_settings(
            PGW_TELEMETRY_BACKEND="none",
            LLM__ACME__1__BASE_URL="http://127.0.0.1:9/v1",
            LLM__ACME__1__MODEL="m",
            LLM__ACME__1__PLUGIN=str(missing),
        )
    assert str(missing) in str(caught.value)


async def test_from_env_reads_the_file_under_the_environment(mock: Mock, uid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mock.script(uid, {"then": {"content": "from the env file"}})
    keys = base(**source(mock, "LLM", "openai", 1, uid, "gpt-file"))
    (tmp_path / "gateway.env").write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    # The process environment wins over the file, as for `polygateway serve`.
    monkeypatch.setenv("LLM__OPENAI__1__MODEL", "gpt-env")
    monkeypatch.chdir(tmp_path)
    async with GatewayClient.from_env("gateway.env") as client:
        resp = await client.chat([{"role": "user", "content": "hi"}])
    assert (resp.content, resp.model, resp.source_name) == ("from the env file", "gpt-env", "openai-1")


def test_a_malformed_env_file_is_located_but_never_quoted(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("PGW_TELEMETRY_BACKEND=none\nLLM__OPENAI__1__API_KEY='sk-live-abc123\n")
    with pytest.raises(ConfigError) as caught:
        GatewayClient.from_env(str(env))
    shown = str(caught.value)
    assert "sk-live-abc123" not in shown
    assert shown.startswith(f"cannot read {env}: line 2 does not parse")
    assert caught.value.keys == [str(env)]


def test_an_explicit_env_file_that_is_missing_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        GatewayClient.from_env(str(tmp_path / "missing.env"))
    assert caught.value.keys == [str(tmp_path / "missing.env")]
