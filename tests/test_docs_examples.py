"""The examples in the README and the quick docs pages run as written (the slower pages' examples are exercised by
their packages' tests)."""

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/actions.md", "docs/train.md", "docs/core.md", "docs/emlp.md", "docs/cli.md",
         "docs/marglik.md", "docs/development.md", "docs/ode.md", "docs/pacbayes.md", "docs/scale.md"]


def _blocks(page: str) -> list[str]:
    """Every ```python block, dedented (a block inside a list item is indented with it)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)]


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    blocks = _blocks(page)
    assert blocks, f"{page} has no python example"
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page}[{i}]", "exec"), {"__name__": "__docs__"})
