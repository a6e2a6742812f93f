"""Seed 001 at paper scale on MNIST: quadrant MNIST and rotated / translated MNIST built the paper's way from idx
files, and the paper-scale settings of ``layerwise-quadrant`` and ``layerwise-rotated``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from symkit.datasets.quadrant_digits import quadrant_mnist, transformed_mnist
from symkit.datasets.sources import load_images
from symkit.lab import runtime
from symkit.lab.experiments.layerwise_common import PAPER_OPTIMISER
from symkit.lab.experiments.registry import get_experiment

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_files import write_tiny_data  # noqa: E402

OPTIMISER_FIELDS = ("optimizer", "lr", "lr_hyp", "batch_size")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    return str(write_tiny_data(tmp_path_factory.mktemp("mnist")))


def test_quadrant_mnist_puts_every_digit_in_its_labelled_quadrant_of_a_32_pixel_canvas(data_dir):
    xtr, ytr, xte, yte = quadrant_mnist("digit_quadrant", seed=3, data_dir=data_dir)
    _, digits = load_images("mnist", "train", data_dir=data_dir)
    _, ydig, _, _ = quadrant_mnist("digit", seed=3, data_dir=data_dir)
    assert xtr.shape == (60, 1, 32, 32) and xte.shape == (30, 1, 32, 32)
    torch.testing.assert_close(ytr % 10, digits)
    torch.testing.assert_close(ydig, digits)  # the same placements, only the label differs
    assert float(xtr.mean()) == pytest.approx(0.0, abs=1e-5) and float(xtr.std()) == pytest.approx(1.0, abs=1e-5)
    for x, y in zip(torch.cat([xtr, xte]), torch.cat([ytr, yte])):
        r, c = divmod(int(y) // 10, 2)
        ink = x[0] > x.min() + 1e-6
        inside = ink[r * 16:(r + 1) * 16, c * 16:(c + 1) * 16].sum()
        assert inside == ink.sum() > 0  # 56 -> 32 maps each 28x28 quadrant onto its own 16x16 block
    assert {int(q) for q in ytr // 10} == {0, 1, 2, 3}


def test_transformed_mnist_rotates_and_shifts_each_image_once(data_dir):
    plain = transformed_mnist("none", n_train=40, n_test=20, data_dir=data_dir)
    rotated = transformed_mnist("rotated", n_train=40, n_test=20, data_dir=data_dir)
    shifted = transformed_mnist("translated", n_train=40, n_test=20, data_dir=data_dir)
    again = transformed_mnist("rotated", n_train=40, n_test=20, data_dir=data_dir)
    other_seed = transformed_mnist("rotated", n_train=40, n_test=20, seed=1, data_dir=data_dir)
    assert plain[0].shape == (40, 1, 32, 32) and plain[2].shape == (20, 1, 32, 32)
    torch.testing.assert_close(plain[1], rotated[1])
    torch.testing.assert_close(rotated[0], again[0])  # fixed per image
    assert not torch.equal(rotated[0], other_seed[0])
    for moved in (rotated, shifted):
        assert (moved[0] - plain[0]).abs().amax(dim=(1, 2, 3)).min() > 0
    with pytest.raises(ValueError, match="transform"):
        transformed_mnist("sheared")


@pytest.mark.parametrize("name", ["layerwise-quadrant", "layerwise-rotated"])
def test_paper_scale_reads_mnist_with_the_papers_optimiser_and_one_seed(name, data_dir):
    exp = get_experiment(name)
    with runtime.using(runtime.RunSettings(data_dir=data_dir)):  # a paper-scale config checks its data folder
        paper = exp.config_at("paper")
    assert paper.source == "mnist" and paper.n_epochs == 1000 and paper.n_test == 10_000
    assert {k: getattr(paper, k) for k in PAPER_OPTIMISER} == PAPER_OPTIMISER
    assert paper.mc_samples == 0 and paper.combine == "mean"  # exact GGN, paths averaged (the authors' code)
    assert exp.sweep_of("paper")["seed"] == [0] and exp.sweep_of("paper")["method"] == ["map", "laplace"]
    assert exp.config_at("default").source == "digits"


def test_rotated_trains_with_the_quadrant_tasks_optimiser_settings(data_dir):
    quadrant, rotated = get_experiment("layerwise-quadrant"), get_experiment("layerwise-rotated")
    with runtime.using(runtime.RunSettings(data_dir=data_dir)):
        for scale in ("default", "paper"):
            q, r = quadrant.config_at(scale), rotated.config_at(scale)
            assert {k: getattr(r, k) for k in OPTIMISER_FIELDS} == {k: getattr(q, k) for k in OPTIMISER_FIELDS}
        assert rotated.config_at("paper").alpha == 2 and rotated.config_at("paper").max_shift == 8
    assert rotated.config_at("default").optimizer == "sgd" and rotated.config_at("default").lr == 0.03


def test_mnist_needs_a_data_folder_before_any_run(monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    with pytest.raises(ValueError, match="no data directory"):
        get_experiment("layerwise-rotated").config_at("paper")
    with pytest.raises(ValueError, match="source"):
        get_experiment("layerwise-quadrant").config_at("default", source="cifar10")
