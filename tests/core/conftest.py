"""Core test setup: single-threaded BLAS (on a shared 2-core machine threaded BLAS mostly waits for its own
threads) and a fresh on-disk basis cache, so no test reads bases stored by an earlier run."""

import os
import sys
import tempfile

import pytest
from threadpoolctl import threadpool_limits

# shared hypothesis strategies (core_strategies.py) live next to the tests; importlib mode does not add this folder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, scope="session")
def _core_session_setup():
    with tempfile.TemporaryDirectory(prefix="symkit-core-cache-") as d:
        old = os.environ.get("SYMKIT_CACHE_DIR")
        os.environ["SYMKIT_CACHE_DIR"] = d
        with threadpool_limits(limits=1):
            yield
        if old is None:
            os.environ.pop("SYMKIT_CACHE_DIR", None)
        else:
            os.environ["SYMKIT_CACHE_DIR"] = old
