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

#: The test files that take longest (seconds of `pytest --durations=60` on two busy cores, 2026-11), started first.
#: `make test` gives each of its two workers whole files (`--dist loadfile --no-loadscope-reorder`) in collection
#: order, so a long file collected last keeps one worker busy after the other has finished; longest first, the
#: workers end together. Keep it roughly sorted when a file's time changes much.
LONGEST_FIRST = (
    "tests/experiments/test_demo.py",  # 250 s
    "tests/rl/test_docs_rl.py",  # 165 s
    "tests/experiments/test_paper_scale.py",  # 165 s
    "tests/test_docs_examples.py",  # 161 s
    "tests/cli/test_probes.py",  # 108 s
    "tests/cli/test_cli_ray.py",  # 105 s
    "tests/cli/test_cli_resume.py",  # 54 s
    "tests/experiments/test_rl_sac.py",  # 47 s
    "tests/experiments/test_rpp_levels.py",  # 40 s
    "tests/experiments/test_emlp_data_efficiency.py",  # 40 s
    "tests/core/test_thesis_tables.py",  # 38 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the files of :data:`LONGEST_FIRST` first, in its order; the others, and the tests within a file, keep
    their order."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    missing = [path for path in LONGEST_FIRST if not (config.rootpath / path).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names files that do not exist: {missing}")
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
