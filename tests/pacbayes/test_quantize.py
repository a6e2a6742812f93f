"""The learned quantiser (thesis §5.4.2, Eq. 5.4): nearest-level codes, the straight-through gradients, the float16
codebook, the uniform and k-means initialisations, and their edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.pacbayes.quantize import (
    Quantizer,
    initial_codebook,
    kmeans_codebook,
    nearest_codes,
    quantize,
    uniform_codebook,
)

finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32)


def _with_codebook(values: list[float], dtype: torch.dtype = torch.float64) -> Quantizer:
    q = Quantizer(len(values), dtype=dtype)
    with torch.no_grad():
        q.codebook.copy_(torch.tensor(values, dtype=dtype))
    return q


# ---------------------------------------------------------------------------------------------- values
@settings(max_examples=150, deadline=None)
@given(w=st.lists(finite, max_size=40), c=st.lists(finite, min_size=1, max_size=9),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_quantised_values_are_the_nearest_float16_level(w, c, dtype):
    q = _with_codebook(c, dtype)
    x = torch.tensor(w, dtype=dtype)
    out = q(x)
    levels = q.codebook_fp16().to(dtype)
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.isin(out, levels).all()  # w_hat takes values in the (float16) codebook
    dist = (x[:, None] - levels[None, :]).abs()
    assert torch.equal((x - out).abs(), dist.min(dim=1).values)  # and the nearest one
    assert torch.equal(out, levels[q.codes(x)])  # the decoded message is the quantised model, exactly


@settings(max_examples=60, deadline=None)
@given(w=st.lists(finite, min_size=1, max_size=60), levels=st.integers(1, 9),
       init=st.sampled_from(["uniform", "kmeans"]))
def test_initialised_quantisers_map_into_their_codebook(w, levels, init):
    x = torch.tensor(w, dtype=torch.float64)
    distinct = len(set(w))
    if (init == "kmeans" and levels > distinct) or (init == "uniform" and levels > 1 and not any(w)):
        with pytest.raises(ValueError):
            Quantizer(levels).initialize(x, init)
        return
    q = Quantizer(levels).initialize(x, init)
    assert q.levels == levels and q.codebook.dtype == torch.float64
    assert torch.isin(q(x), q.codebook_fp16().double()).all()


def test_ties_go_to_the_lowest_index():
    c = torch.tensor([1.0, -1.0, 1.0])
    assert nearest_codes(torch.tensor([0.0, 1.0, -1.0, 5.0]), c).tolist() == [0, 0, 1, 0]


def test_codebook_is_rounded_to_float16_in_the_forward_pass(dtype):
    q = _with_codebook([0.1, 1 / 3, -2.0001], dtype)
    x = torch.tensor([0.09, 0.3, -2.5, 7.0], dtype=dtype)
    out = q(x)
    rounded = torch.tensor([0.1, 1 / 3, -2.0001], dtype=torch.float16).to(dtype)
    assert torch.equal(out, rounded[[0, 1, 2, 1]])
    assert not torch.isin(out, q.codebook.detach()).any()  # the raw levels are never used
    assert q.codebook_fp16().dtype == torch.float16 and not q.codebook_fp16().requires_grad


# ---------------------------------------------------------------------------------------------- Eq. 5.4
def test_straight_through_jacobians_are_exact(dtype):
    torch.manual_seed(0)
    w = torch.randn(9, dtype=dtype)
    q = Quantizer(4).to(dtype).initialize(w)
    codes = q.codes(w)
    jw, jc = torch.autograd.functional.jacobian(lambda w_, c_: quantize(w_, c_), (w, q.codebook.detach()))
    assert torch.equal(jw, torch.eye(9, dtype=dtype))  # d w_hat_i / d w_j = delta_ij
    assert torch.equal(jc, torch.nn.functional.one_hot(codes, 4).to(dtype))  # d w_hat_i / d c_k = 1[q(i) = k]


def test_straight_through_gradients_through_the_module(dtype):
    torch.manual_seed(1)
    w = torch.randn(3, 50, dtype=dtype, requires_grad=True)
    q = Quantizer(5).to(dtype).initialize(w.detach(), "kmeans")
    g = torch.randint(-9, 10, (3, 50)).to(dtype)  # integers: every sum is exact in any order
    q(w).backward(g)
    assert torch.equal(w.grad, g)
    codes = q.codes(w.detach()).reshape(-1)
    expected = torch.stack([g.reshape(-1)[codes == k].sum() for k in range(5)])
    assert torch.equal(q.codebook.grad, expected)
    assert q.codebook.grad.dtype == dtype


def test_quantisation_aware_steps_lower_the_quantisation_error():
    """With the STE the codebook gradient of the squared error is Lloyd's: gradient steps on c lower it."""
    torch.manual_seed(0)
    w = torch.randn(500, dtype=torch.float64)
    q = Quantizer(7, dtype=torch.float64).initialize(w)
    before = (q(w) - w).square().mean().item()
    opt = torch.optim.SGD(q.parameters(), lr=1.0)
    for _ in range(50):
        opt.zero_grad()
        (q(w) - w).square().mean().backward()
        opt.step()
    assert (q(w) - w).square().mean().item() < 0.9 * before


# ---------------------------------------------------------------------------------------------- initialisation
def _reference_uniform(w: np.ndarray, levels: int) -> np.ndarray:
    """The authors' rule with numpy (bins over +-max|w|, bin means), the empty bins at their centres."""
    m = np.abs(w).max()
    edges = np.linspace(-m, m, levels + 1)
    bins = np.clip(np.digitize(w, edges) - 1, 0, levels - 1)
    centres = (edges[:-1] + edges[1:]) / 2
    return np.array([w[bins == k].mean() if (bins == k).any() else centres[k] for k in range(levels)])


def test_uniform_codebook_by_hand_and_against_numpy():
    w = torch.tensor([-1.0, -0.9, 0.1, 0.2, 1.0], dtype=torch.float64)
    assert torch.allclose(uniform_codebook(w, 4), torch.tensor([-0.95, -0.25, 0.15, 1.0], dtype=torch.float64))
    rng = np.random.default_rng(0)
    for levels in (1, 2, 7, 50):
        x = rng.standard_t(3, size=2000)
        got = uniform_codebook(torch.from_numpy(x), levels).numpy()
        np.testing.assert_allclose(got, _reference_uniform(x, levels), rtol=1e-12, atol=1e-12)


def test_kmeans_is_at_least_as_good_as_uniform_and_stationary():
    gen = torch.Generator().manual_seed(0)
    w = torch.cat([0.05 * torch.randn(3000, generator=gen, dtype=torch.float64) - 1,
                   0.2 * torch.randn(1000, generator=gen, dtype=torch.float64) + 2])  # bimodal, unequal modes
    mse = {}
    for init in ("uniform", "kmeans"):
        q = Quantizer(7, dtype=torch.float64).initialize(w, init)
        mse[init] = (q(w) - w).square().mean().item()
    assert mse["kmeans"] < mse["uniform"]
    c = kmeans_codebook(w, 7)
    assert torch.equal(c, kmeans_codebook(w, 7))  # deterministic
    assert (c[1:] > c[:-1]).all()
    codes = nearest_codes(w, c)
    means = torch.stack([w[codes == k].mean() for k in range(7)])
    torch.testing.assert_close(means, c, rtol=0, atol=1e-12)  # a fixed point of Lloyd's iteration


@settings(max_examples=40, deadline=None)
@given(w=st.lists(finite, min_size=2, max_size=80), levels=st.integers(2, 6))
def test_kmeans_error_never_exceeds_uniform(w, levels):
    x = torch.tensor(w, dtype=torch.float64)
    if len(set(w)) < levels:
        return
    err = {init: (c[nearest_codes(x, c)] - x).square().sum().item()
           for init, c in (("u", uniform_codebook(x, levels)), ("k", kmeans_codebook(x, levels)))}
    assert err["k"] <= err["u"] * (1 + 1e-12) + 1e-12


def test_kmeans_with_as_many_levels_as_values_returns_them():
    w = torch.tensor([3.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 3.0])
    assert kmeans_codebook(w, 4).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="distinct"):
        kmeans_codebook(w, 5)


def test_edge_cases():
    w = torch.tensor([0.5, -0.25, 2.0])
    one = Quantizer(1).initialize(w)
    assert one.codebook.tolist() == pytest.approx([0.75])
    assert one(w).tolist() == [0.75] * 3
    assert Quantizer(1).initialize(w, "kmeans").codebook.tolist() == pytest.approx([0.75])
    const = torch.full((10,), 0.3)
    q = Quantizer(3).initialize(const)  # the one occupied bin is the constant, the others keep their centres
    assert torch.equal(q(const), torch.full((10,), 0.3).half().float())
    with pytest.raises(ValueError, match="distinct"):
        Quantizer(3).initialize(const, "kmeans")
    with pytest.raises(ValueError, match="every weight is 0"):
        Quantizer(3).initialize(torch.zeros(5))
    assert Quantizer(1).initialize(torch.zeros(5)).codebook.tolist() == [0.0]
    for init in ("uniform", "kmeans"):
        with pytest.raises(ValueError, match="empty"):
            Quantizer(3).initialize(torch.zeros(0), init)
    with pytest.raises(ValueError, match="non-finite"):
        Quantizer(3).initialize(torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="float16 range"):
        Quantizer(2).initialize(torch.tensor([1e6, -1e6]))
    with pytest.raises(ValueError, match="init"):
        initial_codebook(w, 2, "median")
    with pytest.raises(ValueError):
        Quantizer(0)
    with pytest.raises(TypeError):
        Quantizer(2.0)
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        Quantizer(2)(torch.arange(3))
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        Quantizer(2)(torch.ones(3, dtype=torch.bfloat16))
    empty = Quantizer(3)(torch.zeros(0, 4))  # no weights: nothing to quantise, not an error
    assert empty.shape == (0, 4) and Quantizer(3).codes(torch.zeros(0)).dtype == torch.long


def test_initialize_keeps_the_parameter_unless_it_must_change():
    w = torch.randn(100)
    q = Quantizer(5)
    p = q.codebook
    q.initialize(w)
    assert q.codebook is p  # an optimiser built before still holds it
    q.initialize(w, levels=7)
    assert q.codebook is not p and q.levels == 7
    q.initialize(w.double())
    assert q.codebook.dtype == torch.float64 and q.levels == 7


# ---------------------------------------------------------------------------------------------- device and dtype
def test_quantiser_follows_the_weights(device, dtype):
    torch.manual_seed(0)
    w = torch.randn(64, device=device, dtype=dtype)
    for init in ("uniform", "kmeans"):
        q = Quantizer(6).initialize(w, init)
        assert q.codebook.device == w.device and q.codebook.dtype == dtype
        out, codes = q(w), q.codes(w)
        assert out.device == w.device and out.dtype == dtype
        assert codes.device == w.device and codes.dtype == torch.long
        assert q.codebook_fp16().device == w.device


def test_quantiser_on_meta():
    w = torch.empty(3, 100, device="meta")
    q = Quantizer(5, device="meta")
    assert q(w).device.type == "meta" and q(w).shape == w.shape
    assert q.codes(w).device.type == "meta"
    assert q.initialize(w, "uniform").codebook.device.type == "meta"
    with pytest.raises(ValueError, match="meta"):
        q.initialize(w, "kmeans")
