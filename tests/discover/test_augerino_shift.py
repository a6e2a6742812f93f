"""Augerino over shifts (symkit.discover.baselines.AugerinoShift, Benton et al. 2020; Yeh et al. 2022 §5.3, App. D.1):
the shift operators, the learned distribution, the averaging over sampled passes, and what it learns."""

import pytest
import torch

from symkit.discover.baselines import AugerinoShift, shift_matrices
from symkit.train import Trainer


def _linear(k_in, k_out, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(k_in, k_out, bias=False)


def test_shift_matrices_move_entries_with_zero_fill_or_cyclically():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    shifts = torch.tensor([-1, 0, 2])
    zero = shift_matrices(shifts, 4) @ x
    assert torch.equal(zero, torch.tensor([[2.0, 3.0, 4.0, 0.0], [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 1.0, 2.0]]))
    cyclic = shift_matrices(shifts, 4, "cyclic") @ x
    assert torch.equal(cyclic, torch.tensor([[2.0, 3.0, 4.0, 1.0], [1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 1.0, 2.0]]))
    # cyclic shifts are a group action of Z(4): S_{-s} S_s = I and S_1^4 = I
    S = shift_matrices(torch.arange(-3, 4), 4, "cyclic")
    assert torch.equal(S[0] @ S[6], torch.eye(4))
    assert torch.equal(torch.linalg.matrix_power(S[4], 4), torch.eye(4))
    with pytest.raises(ValueError, match="boundary"):
        shift_matrices(shifts, 4, "reflect")


def test_distribution_starts_uniform_and_sums_to_one():
    aug = AugerinoShift(_linear(6, 6), max_shift=3)
    assert aug.shifts.tolist() == [-3, -2, -1, 0, 1, 2, 3]
    p = aug.shift_probs()
    torch.testing.assert_close(p, torch.full((7,), 1 / 7), rtol=0, atol=1e-7)
    assert aug.identity_mass() == pytest.approx(1 / 7, abs=1e-7)
    # the width reward at the uniform start is -w log(7), the largest entropy there is
    assert aug.regularizer().item() == pytest.approx(-1e-2 * torch.log(torch.tensor(7.0)).item(), rel=1e-6)
    with torch.no_grad():
        aug.shift_logits.copy_(torch.tensor([3.0, -1.0, 0.5, 2.0, 0.0, -4.0, 1.0]))
    assert aug.shift_probs().sum().item() == pytest.approx(1.0, abs=1e-6)
    assert aug.identity_mass() == pytest.approx(torch.softmax(aug.shift_logits, 0)[3].item(), abs=1e-7)


def test_samples_follow_the_learned_distribution():
    """Straight-through samples are one-hot, and their frequencies are softmax(logits) (Gumbel-max): 20,000 draws,
    each frequency within 0.015 of its probability (over four binomial standard deviations)."""
    aug = AugerinoShift(_linear(5, 5), max_shift=2)
    target = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    with torch.no_grad():
        aug.shift_logits.copy_(target.log())
    aug.generator = torch.Generator().manual_seed(0)
    w = aug.sample_weights(4000, n=5)
    assert w.shape == (5, 4000, 5)
    hard = w.detach().round()  # one-hot up to the rounding of the straight-through sum
    torch.testing.assert_close(w.detach(), hard, rtol=0, atol=1e-6)
    assert torch.equal(hard.sum(-1), torch.ones(5, 4000))
    freq = hard.reshape(-1, 5).mean(0)
    assert (freq - target).abs().max().item() < 0.015, freq
    # relaxed samples (hard=False): mixtures over the shifts, not one-hot
    aug.hard = False
    soft = aug.sample_weights(100).detach()
    torch.testing.assert_close(soft.sum(-1), torch.ones(5, 100))
    assert soft.max().item() < 1.0 and (soft.max(-1).values < 0.999).any()


def test_forward_averages_the_sampled_passes_each_shifted_back():
    """The output is mean over five passes of S_{-s} W S_s x, with each input's own shifts s (compared with the
    explicit sum over the same samples); the samples include shifts other than 0, so a model that never shifts
    fails, and so does one that keeps a single pass."""
    torch.manual_seed(0)
    W = torch.randn(4, 6)
    linear = torch.nn.Linear(6, 4, bias=False)
    with torch.no_grad():
        linear.weight.copy_(W)
    aug = AugerinoShift(linear, max_shift=2, n_samples=5)
    x = torch.randn(3, 6)
    aug.generator = torch.Generator().manual_seed(1)
    shifts = aug.shifts[aug.sample_weights(3).argmax(-1)]  # (5, 3): the shift of each pass and input
    assert (shifts != 0).any() and len(set(shifts.flatten().tolist())) > 1
    aug.generator = torch.Generator().manual_seed(1)
    out = aug(x)
    expected = torch.zeros(3, 4)
    for b in range(3):
        for s in shifts[:, b].tolist():
            into, back = shift_matrices(torch.tensor([s]), 6)[0], shift_matrices(torch.tensor([-s]), 4)[0]
            expected[b] += back @ (W @ (into @ x[b])) / 5
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    # invariant form: the outputs are not shifted back
    inv = AugerinoShift(linear, max_shift=2, n_samples=5, equivariant=False)
    inv.generator = torch.Generator().manual_seed(1)
    expected_inv = torch.stack([sum(W @ (shift_matrices(torch.tensor([s]), 6)[0] @ x[b]) for s in shifts[:, b].tolist())
                                / 5 for b in range(3)])
    torch.testing.assert_close(inv(x), expected_inv, rtol=1e-5, atol=1e-5)
    # all mass on the shift 0: the plain model
    with torch.no_grad():
        aug.shift_logits.copy_(torch.tensor([-50.0, -50.0, 50.0, -50.0, -50.0]))
    torch.testing.assert_close(aug(x), linear(x), rtol=1e-6, atol=1e-6)


def test_gradient_reaches_the_shift_logits():
    aug = AugerinoShift(_linear(5, 5), max_shift=2)
    aug.generator = torch.Generator().manual_seed(0)
    aug(torch.randn(8, 5)).pow(2).sum().backward()
    assert aug.shift_logits.grad is not None and aug.shift_logits.grad.abs().sum() > 0


def _learn_distribution(aug, x, y, steps=300, lr=0.05):
    """Fit only the shift distribution, the wrapped model frozen (at the map that made ``y``)."""
    aug.model.requires_grad_(False)
    aug.generator = torch.Generator().manual_seed(0)
    Trainer(aug, objective=lambda m: ((m(x) - y) ** 2).mean() + m.regularizer(), params=[aug.shift_logits], lr=lr,
            epochs=steps, desc="augerino").fit()


def test_learns_not_to_shift_without_a_shift_symmetry_and_stays_wide_with_one():
    """A dense random map with zero padding: no shift but 0 is a symmetry, and the mass on the shift 0 grows from
    1/5 to over 0.9. A circulant map with cyclic shifts: every shift is an exact symmetry, the loss cannot tell the
    shifts apart, and the width reward keeps the distribution at its uniform start (mass on 0 within 0.02 of 1/5)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 5, generator=g)
    dense = torch.nn.Linear(5, 5, bias=False)
    with torch.no_grad():
        dense.weight.copy_(torch.randn(5, 5, generator=g))
    aug = AugerinoShift(dense, max_shift=2)
    _learn_distribution(aug, x, dense(x).detach())
    assert aug.identity_mass() > 0.9, aug.shift_probs()

    c = torch.randn(5, generator=g)
    circulant = torch.nn.Linear(5, 5, bias=False)
    with torch.no_grad():
        circulant.weight.copy_(torch.stack([torch.roll(c, i) for i in range(5)]))  # C[i, j] = c[(j - i) mod 5]
    wide = AugerinoShift(circulant, max_shift=2, boundary="cyclic")
    _learn_distribution(wide, x, circulant(x).detach())
    assert wide.identity_mass() == pytest.approx(0.2, abs=0.02), wide.shift_probs()
    assert wide.shift_probs().sum().item() == pytest.approx(1.0, abs=1e-6)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_shift"):
        AugerinoShift(_linear(3, 3), max_shift=-1)
    with pytest.raises(ValueError, match="n_samples"):
        AugerinoShift(_linear(3, 3), n_samples=0)
    with pytest.raises(ValueError, match="boundary"):
        AugerinoShift(_linear(3, 3), boundary="reflect")
    with pytest.raises(ValueError, match="tau"):
        AugerinoShift(_linear(3, 3), tau=0.0)
    with pytest.raises(TypeError, match="nn.Module"):
        AugerinoShift(lambda x: x)
    with pytest.raises(ValueError, match=r"\(B, K\)"):
        AugerinoShift(_linear(3, 3))(torch.randn(2, 3, 3))
