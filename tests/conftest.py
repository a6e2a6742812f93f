"""Shared test configuration."""

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("SYMKIT_PROGRESS", "0")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
