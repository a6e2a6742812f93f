"""The examples in the README and the docs pages run as written and assert what they print: the quick pages run
here, the slower ones in the test named for them in :data:`RUN_ELSEWHERE`."""

import ast
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/actions.md", "docs/train.md", "docs/core.md", "docs/emlp.md", "docs/cli.md",
         "docs/marglik.md", "docs/development.md", "docs/ode.md", "docs/pacbayes.md", "docs/scale.md",
         "docs/discover.md", "docs/dynamics.md", "docs/measure.md", "docs/powernet.md"]
#: Pages whose examples are run by a test of their own package (too slow here, or with that package's extras).
RUN_ELSEWHERE = {
    "docs/lee.md": "tests/experiments/test_lee_zoo.py",
    "docs/layerwise.md": "tests/experiments/test_docs_layerwise.py",  # a paper-scale epoch and update, ~25 s
    "docs/rl.md": "tests/rl/test_docs_rl.py",
}


def _blocks(page: str) -> list[str]:
    """Every ```python block, dedented (a block inside a list item is indented with it)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)]


def _pages_with_examples() -> list[str]:
    pages = ["README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").glob("*.md")))]
    return [page for page in pages if _blocks(page)]


def _asserts(code: str) -> bool:
    return any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(code)))


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    blocks = _blocks(page)
    assert blocks, f"{page} has no python example"
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page}[{i}]", "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("page", sorted(_pages_with_examples()))
def test_every_example_asserts(page):
    """A value in a comment (``# 15 91``) is only printed unless the block asserts it: every block has an assert."""
    silent = [f"{page}[{i}]" for i, code in enumerate(_blocks(page)) if not _asserts(code)]
    assert not silent, f"these examples assert nothing: {silent}"


def test_every_page_with_examples_is_run_by_a_test():
    """Each page with python blocks is in PAGES, or in RUN_ELSEWHERE with a test file that reads and runs it."""
    unrun = [page for page in _pages_with_examples() if page not in PAGES and page not in RUN_ELSEWHERE]
    assert not unrun, f"no test runs the examples of {unrun}: add them to PAGES or RUN_ELSEWHERE"
    for page, test_file in RUN_ELSEWHERE.items():
        assert _runs(test_file, page), f"{test_file} does not run the examples of {page}"


def _runs(test_file: str, page: str) -> bool:
    """Whether ``test_file`` names ``page`` (its path or file name as a string) and calls ``exec``."""
    if not (ROOT / test_file).is_file():
        return False
    nodes = list(ast.walk(ast.parse((ROOT / test_file).read_text())))
    strings = {node.value for node in nodes if isinstance(node, ast.Constant)}
    calls = {node.func.id for node in nodes if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return bool({page, Path(page).name} & strings) and "exec" in calls
