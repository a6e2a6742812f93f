"""Issue 17's acceptance: every experiment accepts ``--scale paper --data-dir D --device cpu`` and runs its first
epoch (``--smoke``: one epoch of two batches, nothing stored) on tiny files of every format; the experiments whose
paper scale reads real data refuse to plan without a data folder, naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.experiments.registry import all_experiments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_files import write_tiny_data  # noqa: E402

#: the experiments whose paper scale reads the user's files (the others generate their data)
READS_FILES = {"pac-bayes-digits", "pac-bayes-structure", "lee-trends", "lee-zoo", "lee-rotmnist",
               "layerwise-quadrant", "layerwise-rotated", "layerwise-cifar", "rpp-conv"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return write_tiny_data(tmp_path_factory.mktemp("data"))


def _smoke(*args: str):
    return CliRunner().invoke(app, ["reproduce", *args, "--scale", "paper", "--device", "cpu", "--smoke"])


@pytest.mark.parametrize("name", sorted(all_experiments()))
def test_every_experiment_runs_its_first_paper_scale_epoch_on_tiny_files(name, data_dir, monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    result = _smoke(name, "--data-dir", str(data_dir))
    assert result.exit_code == 0, result.output
    assert "ok in" in result.output and "not stored" in result.output


@pytest.mark.parametrize("name", sorted(READS_FILES))
def test_paper_scale_without_a_data_folder_is_refused_in_one_line(name, monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    result = _smoke(name)
    assert result.exit_code == 2 and "no data directory" in result.output and "Traceback" not in result.output


def test_the_experiments_that_read_files_exist():
    assert READS_FILES <= set(all_experiments())
