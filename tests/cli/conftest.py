"""Fixtures for the command-line tests: the toy experiment and a log of its executions."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def toy():
    """The toy experiment, registered in this process for the test only (other suites never see it)."""
    import symkit_cli_toy

    from symkit.experiments import registry

    registry._REGISTRY[symkit_cli_toy.NAME] = symkit_cli_toy.EXPERIMENT
    yield symkit_cli_toy.EXPERIMENT
    registry._REGISTRY.pop(symkit_cli_toy.NAME, None)


@pytest.fixture
def toy_log(tmp_path, monkeypatch) -> Path:
    """A file in which every toy run (in this process or its children) leaves one line."""
    path = tmp_path / "toy.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(path))
    return path
