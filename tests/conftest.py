"""Shared test configuration."""

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("SYMKIT_PROGRESS", "0")
torch.set_num_threads(1)  # the suite is many small models: one thread each is fastest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
