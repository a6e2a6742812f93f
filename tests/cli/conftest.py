"""Fixtures for the command-line tests: the toy experiment and a log of its executions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the helper and toy-experiment modules of this folder are imported by name (pytest runs in importlib mode, which
# does not put test folders on sys.path); subprocesses get the folder through PYTHONPATH (symkit_cli_helpers)
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def toy():
    """The toy experiment, registered in this process for the test only (other suites never see it)."""
    import symkit_cli_toy

    from symkit.lab.experiments import registry

    registry._REGISTRY[symkit_cli_toy.NAME] = symkit_cli_toy.EXPERIMENT
    yield symkit_cli_toy.EXPERIMENT
    registry._REGISTRY.pop(symkit_cli_toy.NAME, None)


@pytest.fixture
def toy_scaled():
    """The toy experiment with its own paper scale and paper sweep, registered for the test only."""
    import symkit_cli_toy

    from symkit.lab.experiments import registry

    registry._REGISTRY[symkit_cli_toy.SCALED] = symkit_cli_toy.SCALED_EXPERIMENT
    yield symkit_cli_toy.SCALED_EXPERIMENT
    registry._REGISTRY.pop(symkit_cli_toy.SCALED, None)


@pytest.fixture
def toy_log(tmp_path, monkeypatch) -> Path:
    """A file in which every toy run (in this process or its children) leaves one line."""
    path = tmp_path / "toy.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(path))
    return path
