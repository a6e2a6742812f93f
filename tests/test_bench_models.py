"""benchmarks/bench_models.py's interleaved timing: every model timed in each round, ratios taken within a round."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_models as bm  # noqa: E402


def test_ratios_are_taken_within_each_round_then_summarised():
    times = {"emlp": [20.0, 40.0, 30.0], "mlp": [10.0, 20.0, 10.0]}  # a machine twice as slow in round 2
    ratios = bm.interleaved_ratios(times)
    assert ratios["emlp"] == (2.0, 2.0, 3.0)  # median, least, greatest of 2, 2, 3
    assert ratios["mlp"] == (1.0, 1.0, 1.0)
    assert bm.interleaved_ratios("failed: x") == "failed: x"
    assert bm._step_ratio(ratios, {}, "emlp") == "2.00x"
    assert bm._step_ratio("failed", {"emlp": {"step_ms": 3.0}, "mlp": {"step_ms": 2.0}}, "emlp") == "1.50x"


def test_every_model_is_timed_in_every_round():
    times = bm.measure_interleaved("O(3)", 16, 8, "cpu", rounds=2)
    assert set(times) == set(bm.MODELS)
    assert all(len(ms) == 2 and all(t > 0 for t in ms) for ms in times.values())


@pytest.mark.parametrize("kind", bm.MODELS)
def test_each_model_takes_a_training_step(kind):
    import torch

    torch.manual_seed(0)
    model, _, step, _ = bm._model_and_step("O(3)", 16, 8, kind, torch.device("cpu"))
    before = [p.detach().clone() for p in model.parameters()]
    step()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # Adam moved the weights
