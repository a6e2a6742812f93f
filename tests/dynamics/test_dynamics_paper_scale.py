"""dynamics-drift at the paper's scale (App. D, E.2): MNIST's test set from the data folder, the paper's per-task
widths and sizes, float32, and the smoke-run limits of the full-batch gradient."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from symkit.actions import Rotations90
from symkit.dynamics import LayerSpec, ProjectNet, full_batch_gradient
from symkit.lab import runtime
from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.dynamics_drift import PAPER_GRAPHS, _task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
from tiny_files import write_tiny_data  # noqa: E402

EXP = get_experiment("dynamics-drift")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(write_tiny_data(tmp_path_factory.mktemp("mnist")))


def test_the_paper_scale_is_app_d():
    cfg = EXP.config_at("paper", group="perm")  # perm reads no files: no data folder needed
    assert (cfg.data, cfg.size, cfg.channels, cfg.samples, cfg.steps, cfg.aug_passes, cfg.runs) == (
        "mnist", 14, 32, 0, 50, 25, 30)
    assert (cfg.perm_head, cfg.perm_batch_size, cfg.shapes_channels, cfg.dtype) == ((64, 32), 200, (32, 32, 16),
                                                                                      "float32")
    grid = EXP.grid(scale="paper")
    assert grid[0]["group"] == "trans" and len(grid) == 6 and {p["seed"] for p in grid} == {0}
    # the default and quick scales keep the bundled digits
    assert EXP.make_config().data == EXP.make_config(quick=True).data == "digits"


def test_mnist_groups_read_the_whole_test_set_and_name_a_missing_folder(data_dir, monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    with pytest.raises(ValueError, match="no data directory"):
        EXP.config_at("paper", group="rot")
    with runtime.using(runtime.RunSettings(data_dir=data_dir)):
        cfg = EXP.config_at("paper", group="rot", channels=2, head=4)
        specs, norm_after, loss, X, Y = _task(cfg)
    assert X.shape == (30, 1, 14, 14) and Y.shape == (30,) and loss == "ce"  # samples=0: all 30 test images
    assert -0.5 <= float(X.min()) and float(X.max()) <= 0.5  # x - 0.5 as in App. D
    assert [(s.c_in, s.c_out) for s in specs] == [(1, 2), (2, 2), (2, 4), (4, 10)] and norm_after == (2,)
    with pytest.raises(ValueError, match="samples must be <= 30"):
        with runtime.using(runtime.RunSettings(data_dir=data_dir)):
            _task(EXP.config_at("paper", group="rot", samples=31))


def test_perm_and_shapes_take_the_paper_widths():
    specs, *_, X, _ = _task(EXP.config_at("paper", group="perm", channels=3))
    assert [(s.c_in, s.c_out) for s in specs] == [(1, 3), (3, 64), (64, 32), (32, 1)] and len(X) == PAPER_GRAPHS
    specs, norm_after, loss, X, Y = _task(EXP.config_at("paper", group="rot-shapes", samples=4))
    assert [(s.c_in, s.c_out) for s in specs] == [(1, 32), (32, 32), (32, 16), (16, 2)] and loss == "pixel_bce"
    assert X.shape == (4, 1, 14, 14) and Y.shape == (4, 2, 14, 14)
    # the empty defaults give the generic widths of the default scale
    specs, *_ = _task(EXP.make_config(group="perm", samples=10))
    assert [(s.c_in, s.c_out) for s in specs] == [(1, 8), (8, 16), (16, 16), (16, 1)]


def test_a_small_float32_paper_run_on_mnist_files(data_dir):
    with runtime.using(runtime.RunSettings(data_dir=data_dir)):
        cfg = EXP.config_at("paper", group="trans", size=6, channels=2, head=4, runs=2, steps=3, aug_passes=2)
        out = EXP.run(cfg)
    assert len(out["to_e_curve_nom"]) == 4
    # float32 rounding of the projections (measured 1.2e-6), four orders under the drift of Nom (0.041)
    assert out["to_e_equi"] < 1e-4 * out["to_e_nom"]
    assert 0 < out["to_e_aug"] < out["to_e_nom"]


def _forward_count(model: ProjectNet) -> list[int]:
    calls = [0]
    model.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.parametrize("mode", ["nominal", "augmented", "equivariant"])
def test_max_batches_takes_two_batches_of_each_gradient(mode):
    rot = Rotations90(4)
    model = ProjectNet([LayerSpec(rot, rot, 1, 2), LayerSpec(rot, rot, 2, 1)], dtype=torch.float64)
    X = torch.randn(16, 1, 4, 4, dtype=torch.float64)
    calls = _forward_count(model)
    full_batch_gradient(model, X, X, mode, "mse", batch_size=4, aug_passes=5)
    assert calls[0] == (20 if mode == "augmented" else 4)
    calls[0] = 0
    full_batch_gradient(model, X, X, mode, "mse", batch_size=4, aug_passes=5, max_batches=2)
    assert calls[0] == 2
    calls[0] = 0
    with runtime.using(runtime.RunSettings(max_epochs=1, max_batches=1)):  # the library ignores the run context
        full_batch_gradient(model, X, X, mode, "mse", batch_size=4, aug_passes=5)
    assert calls[0] == (20 if mode == "augmented" else 4)
    with pytest.raises(ValueError, match="max_batches"):
        full_batch_gradient(model, X, X, mode, "mse", max_batches=0)


def test_a_smoke_run_of_the_experiment_takes_one_step_over_one_batch():
    cfg = EXP.make_config(quick=True, group="trans", runs=2, steps=5)
    with runtime.using(runtime.RunSettings(max_epochs=1, max_batches=1)):
        out = EXP.run(cfg)
    assert len(out["to_e_curve_nom"]) == 2  # the start and one step


def test_a_smoke_run_trains_one_repetition_of_one_step():
    with runtime.using(runtime.RunSettings(max_epochs=1, max_batches=2)):
        out = EXP.run(EXP.make_config(quick=True, group="rot", runs=3))
    assert len(out["to_e_curve_aug"]) == 2 and out["to_e_equi"] < 1e-10
