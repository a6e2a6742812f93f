"""The run-time script of docs/layerwise.md runs as written: one paper-scale CIFAR-10 epoch of the CONV model on
1,280 generated images and one exact-GGN hyperparameter update (about 25 s on one core)."""

import re
import textwrap
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "layerwise.md"


def test_the_run_time_script_of_docs_layerwise_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    exec(compile(textwrap.dedent(code), "docs/layerwise.md[0]", "exec"), {"__name__": "__docs__"})
