"""The compression pipeline (Algorithm 2) end to end on the bundled digits: a non-vacuous bound, a message that
decodes to the classifier it bounds, the pruning baseline, and the checks on its input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from symkit.datasets.digits import load_digits_images
from symkit.nn.vision import SmallCNN
from symkit.pacbayes import (
    arithmetic_decode,
    catoni_bound,
    compute_bound,
    entropy_bits,
    error_rate,
    hoeffding_holdout_bound,
    holdout_bound,
    point_mass_kl_bits,
    pruning_bound,
)

#: the Bayes-free reference: always predicting the most frequent class errs on about 90% of the digits
CHANCE = 0.9


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits_images()
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))
    x, y = x[perm], y[perm]
    return (x[:1438], y[:1438]), (x[1438:], y[1438:])


@pytest.fixture(scope="module")
def report(digits):
    train, test = digits
    torch.manual_seed(0)
    return compute_bound(SmallCNN(1, 10, width=16, norm="none"), train, test, intrinsic_dim=200, epochs=30, lr=0.1,
                         schedule="constant", clip=None, levels=15, quant_init="kmeans", quant_epochs=20,
                         quant_lr=1e-2, hyperparameter_bits=2.0)


def test_a_non_vacuous_bound_on_digits(report):
    """The acceptance check of the issue: the Catoni bound of a CNN compressed to about 1,000 bits, on 1,438
    digits, is well below chance (measured 0.61), and the compressed model beats the constant predictor."""
    assert report.bound < 0.75 < CHANCE
    assert report.quantized_test_error < 0.35
    assert report.quantized_train_error <= report.bound


def test_the_report_adds_up(report):
    parts = (report.payload_bits + report.codebook_bits + report.counts_bits + report.buffer_bits
             + report.position_bits + report.hyperparameter_bits)
    assert report.message_bits == parts
    assert report.buffer_bits == 0  # no batch norm: nothing but the codes, the codebook and the search
    assert report.codebook_bits == 15 * 16 and report.counts_bits == 15 * math.ceil(math.log2(200))
    assert report.kl_bits == point_mass_kl_bits(report.message_bits)
    assert report.bound == catoni_bound(report.quantized_train_error, report.kl_bits, report.n)
    assert report.mcallester > report.bound
    assert set(report.as_dict()) >= {"bound", "message_bits", "quantized_test_error"}
    assert "artifacts" not in report.as_dict()


def test_the_message_decodes_to_the_bounded_classifier(report, digits):
    """A receiver with the seed, the codebook and the message rebuilds exactly the classifier whose training error
    went into the bound; the payload is the arithmetic code's real length."""
    train, _ = digits
    message = report.artifacts["message"]
    assert message.bits == report.payload_bits
    codes = arithmetic_decode(message)
    assert codes.shape == (200,) and codes.min() >= 0 and codes.max() < 15
    assert report.payload_bits >= entropy_bits(codes) - 8  # near the entropy (the coder's slack is tested there)
    classifier = report.artifacts["decode"](message)
    assert error_rate(classifier, train) == report.quantized_train_error
    assert report.artifacts["codebook"].dtype == torch.float16


def test_batch_norm_statistics_are_charged(digits):
    """A batch-norm network's running statistics are part of the classifier, so the message pays 16 bits each."""
    train, test = digits
    torch.manual_seed(0)
    model = SmallCNN(1, 10, width=4, norm="batch")
    stats = sum(b.numel() for name, b in model.named_buffers() if b.is_floating_point())
    r = compute_bound(model, (train[0][:300], train[1][:300]), None, intrinsic_dim=20, epochs=1, quant_epochs=1)
    assert stats == 2 * (4 + 4 + 8 + 8) and r.buffer_bits == 16 * stats
    assert r.test_error is None and r.quantized_test_error is None
    for b in model.buffers():  # evaluated with the statistics as sent
        if b.is_floating_point():
            assert torch.equal(b, b.to(torch.float16).to(b.dtype))


def test_ideal_coder_uses_the_thesis_formula(digits):
    train, _ = digits
    torch.manual_seed(0)
    r = compute_bound(SmallCNN(1, 10, width=4, norm="none"), (train[0][:300], train[1][:300]), intrinsic_dim=30,
                      epochs=1, quant_epochs=1, coder="ideal")
    codes = r.artifacts["message"]
    assert r.payload_bits == entropy_bits(arithmetic_decode(codes)) + 2


def test_intrinsic_dimension_zero_sends_nothing_but_the_search(digits):
    """d = 0 is the prior's own point: the message is the hyperparameter bits alone."""
    train, _ = digits
    torch.manual_seed(0)
    r = compute_bound(SmallCNN(1, 10, width=4, norm="none"), train, intrinsic_dim=0, hyperparameter_bits=3.0)
    assert r.message_bits == 3.0 and r.payload_bits == 0
    assert r.quantized_train_error > 0.7  # an untrained network


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtypes(digits, dtype):
    train, test = digits
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 10)).to(dtype)
    x, y = train[0][:400].to(dtype), train[1][:400]
    r = compute_bound(model, (x, y), (test[0].to(dtype), test[1]), intrinsic_dim=50, epochs=5, quant_epochs=2)
    assert all(math.isfinite(v) for v in (r.bound, r.message_bits, r.quantized_test_error))
    assert r.artifacts["subspace"].w.dtype == dtype


def test_pruning_baseline(digits):
    """Magnitude pruning keeps the stated fraction; the message pays the positions; the decoded model is what was
    evaluated, and it still beats the constant predictor."""
    train, test = digits
    torch.manual_seed(0)
    model = SmallCNN(1, 10, width=8, norm="none")
    total = sum(p.numel() for p in model.parameters())
    r = pruning_bound(model, train, test, keep=0.2, rounds=2, epochs=10, epochs_per_round=3, levels=15,
                      quant_init="kmeans", quant_epochs=5)
    nonzero = sum(int((p != 0).sum()) for p in model.parameters())
    assert nonzero <= round(0.2 * total) == r.intrinsic_dim
    assert r.position_bits > 0 and r.message_bits > r.payload_bits
    assert error_rate(model, train) == r.quantized_train_error
    # beats the constant predictor by 15 points: over seeds 0-3 this set-up's quantized test error is 0.49-0.72
    # (seed 0: 0.49-0.50, as torch's fused or looped Adam round); the old bar, 0.5, held for seed 0 only by luck
    assert r.quantized_test_error < CHANCE - 0.15


def test_holdout_bound(digits):
    train, test = digits
    torch.manual_seed(0)
    model = SmallCNN(1, 10, width=4, norm="none")
    D = sum(p.numel() for p in model.parameters())
    assert holdout_bound(model, test) == hoeffding_holdout_bound(error_rate(model, test), len(test[1]), D)


def test_bad_input_is_named(digits):
    train, _ = digits
    model = SmallCNN(1, 10, width=4, norm="none")
    with pytest.raises(TypeError, match="train must be a pair"):
        compute_bound(model, train[0])
    with pytest.raises(ValueError, match="x has 10 samples and y has 9"):
        compute_bound(model, (train[0][:10], train[1][:9]))
    with pytest.raises(ValueError, match="y must be a 1-D tensor of class indices"):
        compute_bound(model, (train[0][:10], train[1][:10].float()))
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        compute_bound(np.zeros(3), train)
    with pytest.raises(ValueError, match="keep must be a fraction"):
        pruning_bound(model, train, keep=1.5)
