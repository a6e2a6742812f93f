"""The examples of docs/rl.md run as written (in a temporary folder: the SAC example writes its checkpoint)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("stable_baselines3")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "rl.md"


def test_the_rl_page_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) == 2
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/rl.md[{i}]", "exec"), {"__name__": "__docs__"})
    assert (tmp_path / "sac-hopper" / "sac.zip").exists()
