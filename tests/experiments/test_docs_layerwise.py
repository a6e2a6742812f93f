"""The run-time script of docs/layerwise.md runs as written: one paper-scale CIFAR-10 epoch of the CONV model on
1,280 generated images and one exact-GGN hyperparameter update (about 25 s on one core)."""

import re
import textwrap
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "layerwise.md"


def test_the_run_time_script_of_docs_layerwise_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    space = {"__name__": "__docs__"}
    exec(compile(textwrap.dedent(code), "docs/layerwise.md[0]", "exec"), space)
    m = space["m"]  # the paper-scale run the page times: the CONV model of Table 2, one epoch, one update
    assert m["n_params"] == 338_770
    assert m["seconds_per_epoch"] > 0 and m["seconds_per_hyper_update"] > 0
    correct = m["test_acc"] * 500 / 100  # a percentage of the 500 generated test images
    assert abs(correct - round(correct)) < 1e-9 and m["test_acc"] < 50  # noise images: far from half right
