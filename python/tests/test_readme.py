"""The README's quick start runs as written: its `.env` block and its script, in a fresh
working directory, against the mock upstream (only the mock's port is substituted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import Mock


def block(readme: str, marker: str) -> str:
    found = re.search(rf"<!-- {marker} -->\n```\w+\n(.*?)```", readme, re.S)
    assert found, marker
    return found.group(1)


def test_the_quick_start_runs_as_written(mock: Mock, tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    env = block(readme, "quick-start-env").replace("127.0.0.1:9099", mock.addr)
    script = block(readme, "quick-start-py")
    assert "client = GatewayClient.from_env()" in script
    assert "resp = await client.chat(" in script
    (tmp_path / ".env").write_text(env)
    (tmp_path / "quick_start.py").write_text(script)
    run = subprocess.run([sys.executable, "quick_start.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"Hello from the mock upstream\. \[deepseek-1, 1 attempt\(s\), \d+ ms\]\n", run.stdout), run.stdout
