"""The Ray executor, against a local Ray instance: the same stored results as the local executor."""

from __future__ import annotations

import os

import pytest
import ray  # noqa: E402  (the ray extra is part of the test install)
from symkit_cli_helpers import HERE

from symkit.runner.sweep import plan, run_sweep
from symkit.store import Store


@pytest.fixture
def local_ray(monkeypatch):
    """One small local Ray instance whose workers can import the toy experiment."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("SYMKIT_EXPERIMENT_MODULES", "symkit_cli_toy")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_stores_the_same_results_as_local(toy, tmp_path, local_ray):
    specs = plan(toy, quick=True, seeds=[0, 1, 2], settings={"fail_seed": [2]})  # failures travel back too
    local, remote = Store(tmp_path / "local.db"), Store(tmp_path / "ray.db")
    run_sweep(toy, specs, local)
    result = run_sweep(toy, specs, remote, executor="ray", jobs=2)
    assert (result.ran, result.failed) == (6, 2)

    def table(store):
        return {(r.config_hash, r.seed): (r.config, r.metrics, r.status) for r in store.runs(toy.name)}

    assert table(remote) == table(local)
    assert len(table(remote)) == 6
    failed = remote.runs(toy.name, status="failed")
    assert all("toy failure on purpose (seed 2)" in r.error for r in failed)
    assert ray.is_initialized()  # an instance the caller started is left running
