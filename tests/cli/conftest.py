"""Fixtures for the command-line tests: the toy experiment and a log of its executions."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def toy():
    """The toy experiment, registered in this process."""
    import symkit_cli_toy

    return symkit_cli_toy.EXPERIMENT


@pytest.fixture
def toy_log(tmp_path, monkeypatch) -> Path:
    """A file in which every toy run (in this process or its children) leaves one line."""
    path = tmp_path / "toy.log"
    monkeypatch.setenv("SYMKIT_TOY_LOG", str(path))
    return path
