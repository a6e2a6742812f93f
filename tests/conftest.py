"""Shared test configuration."""

import os

import numpy as np
import pytest
import torch
from hypothesis import settings

os.environ.setdefault("SYMKIT_PROGRESS", "0")
torch.set_num_threads(1)  # the suite is many small models: one thread each is fastest

# Property tests draw fresh examples on every run, except under the "ci" profile (.ci/run): there each test's
# examples are derived from the test itself, so a landing is judged on the same examples every time and a failure
# reproduces by running the test again. Every explicit @settings(...) below inherits the loaded profile.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("SYMKIT_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device", default="cpu", help="device for the device-sensitive tests (cpu, cuda, mps)")


@pytest.fixture
def device(request: pytest.FixtureRequest) -> torch.device:
    """The device of the device-sensitive tests: ``pytest --device cuda`` runs them on a GPU."""
    name = request.config.getoption("--device")
    if name != "cpu" and name != "meta":
        kind = name.split(":")[0]
        available = {"cuda": torch.cuda.is_available(),
                     "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()}
        if not available.get(kind, False):
            raise pytest.UsageError(f"--device {name}: no such device on this machine")
    return torch.device(name)


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request: pytest.FixtureRequest) -> torch.dtype:
    """Both floating dtypes (as e3nn's tests do)."""
    return request.param
