"""Base matrices: shifts, rot90, Shannon–Whittaker derivatives and generators (notes part D, items 21, 26–32)."""

import numpy as np
import pytest
import scipy.linalg as sl
import torch
from scipy import ndimage

from symkit.actions import (
    GENERATOR_NAMES,
    affine_generator,
    coordinates,
    derivative_2d,
    generator,
    sw_derivative,
    sw_kernel,
)
from symkit.nn.powernet import (
    DenseBase,
    PermutationBase,
    cyclic_shift,
    expm_base,
    grid_shift,
    make_base,
    rot90_permutation,
    sw_derivative_paper,
    sw_shift,
)


def shift_matrix(n: int) -> np.ndarray:
    """(S x)[a] = x[a + 1], built independently of the library."""
    return np.roll(np.eye(n), -1, axis=0)


# ---------------------------------------------------------------- permutations (item 21)


def test_cyclic_shift_matches_roll_and_matrix():
    n = 7
    s = cyclic_shift(n)
    x = torch.arange(n, dtype=torch.float64)
    assert torch.equal(s(x), torch.roll(x, -1))
    assert torch.equal(s(x, power=-3), torch.roll(x, 3))
    np.testing.assert_array_equal(s.to_dense().numpy(), shift_matrix(n))
    assert s.order() == n


@pytest.mark.parametrize("shape", [(4, 4), (3, 5)])
def test_grid_shifts_are_kronecker_rolls_and_commute(shape):
    h, w = shape
    sx, sy = grid_shift(shape, 0), grid_shift(shape, 1)
    np.testing.assert_array_equal(sx.to_dense().numpy(), np.kron(shift_matrix(h), np.eye(w)))
    np.testing.assert_array_equal(sy.to_dense().numpy(), np.kron(np.eye(h), shift_matrix(w)))
    img = torch.randn(2, h, w, dtype=torch.float64)
    flat = img.reshape(2, -1)
    assert torch.equal(sx(flat).reshape(2, h, w), torch.roll(img, -1, dims=1))
    assert torch.equal(sy(flat, power=2).reshape(2, h, w), torch.roll(img, -2, dims=2))
    mx, my = sx.to_dense(), sy.to_dense()
    assert torch.equal(mx @ my, my @ mx)
    # the roll implementation and the index-permutation form agree, including powers and inverses
    generic = PermutationBase(sx.perm)
    for k in (-2, -1, 1, 3):
        assert torch.equal(sx(flat, power=k), generic(flat, power=k))
        assert torch.equal(sx.power(k)(flat), generic.power(k)(flat))


def test_rot90_permutation_is_np_rot90_of_order_4():
    n = 5
    r = rot90_permutation(n)
    img = np.random.default_rng(0).standard_normal((n, n))
    out = r(torch.as_tensor(img.ravel())).numpy().reshape(n, n)
    np.testing.assert_array_equal(out, np.rot90(img))
    assert r.order() == 4
    m = r.to_dense().numpy()
    np.testing.assert_array_equal(np.linalg.matrix_power(m, 4), np.eye(n * n))
    np.testing.assert_array_equal(r.inverse().to_dense().numpy(), m.T)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="permutation"):
        PermutationBase([0, 0, 1])
    with pytest.raises(ValueError, match="square"):
        DenseBase(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="acts on vectors of size 4"):
        cyclic_shift(4)(torch.zeros(5))
    with pytest.raises(ValueError, match="axis"):
        grid_shift(4, 2)
    with pytest.raises(ValueError, match="unknown base"):
        make_base("translation", 8)
    with pytest.raises(ValueError, match="square grid"):
        make_base("rot90", (4, 6))
    with pytest.raises(ValueError, match="unknown generator"):
        generator(5, "spin")
    with pytest.raises(ValueError, match="n: expected an int >= 1, got 0"):
        sw_derivative(0)
    with pytest.raises(TypeError, match="n: expected an int, got float"):
        sw_derivative(8.0)
    with pytest.raises(TypeError, match="real"):
        expm_base(sw_derivative(8))


# ---------------------------------------------------------------- Shannon–Whittaker kernel and derivative (26–29)


@pytest.mark.parametrize("n", [5, 6, 7, 8, 9, 14, 28])
@pytest.mark.parametrize("which", ["paper", "zero"])
def test_real_derivative_is_skew_symmetric_circulant(n, which):
    d = sw_derivative_paper(n) if which == "paper" else sw_derivative(n, nyquist="zero")
    np.testing.assert_allclose(d, -d.T, atol=1e-13)
    for a in range(n):
        np.testing.assert_allclose(d[a], np.roll(d[0], a), atol=1e-13)


@pytest.mark.parametrize("n", [4, 8, 13, 14, 28])
def test_paper_formula_equals_fourier_derivative_with_zero_nyquist(n):
    np.testing.assert_allclose(sw_derivative_paper(n), sw_derivative(n, nyquist="zero"), atol=1e-12)


@pytest.mark.parametrize("n", [3, 5, 7, 9, 15, 27])
def test_odd_n_expm_of_derivative_is_exact_shift(n):
    for d in (sw_derivative_paper(n), sw_derivative(n)):
        assert np.isrealobj(d)
        np.testing.assert_allclose(sl.expm(d), shift_matrix(n), atol=1e-12)


@pytest.mark.parametrize("n", [8, 14])
def test_even_n_paper_derivative_is_not_the_shift(n):
    err = np.abs(sl.expm(sw_derivative_paper(n)) - shift_matrix(n)).max()
    # the Nyquist mode (-1)^a is kept instead of negated: error 2/n in every entry of that rank-one part
    np.testing.assert_allclose(err, 2.0 / n, rtol=1e-8)
    nyq = (-1.0) ** np.arange(n)
    np.testing.assert_allclose(sl.expm(sw_derivative_paper(n)) @ nyq, nyq, atol=1e-12)


@pytest.mark.parametrize("n", [2, 4, 6, 8, 10, 14, 28, 3, 7, 15])
def test_exact_derivative_exponentiates_to_the_shift_for_every_n(n):
    d = sw_derivative(n, nyquist="exact")
    assert np.iscomplexobj(d) == (n % 2 == 0)
    np.testing.assert_allclose(sl.expm(d), shift_matrix(n), atol=1e-12)
    np.testing.assert_allclose(sl.expm(-3 * d), np.linalg.matrix_power(shift_matrix(n).T, 3), atol=1e-11)


@pytest.mark.parametrize("n", [6, 7, 8, 15])
def test_sw_shift_is_exact_on_integers_and_interpolates(n):
    s = shift_matrix(n)
    for t in (1, 2, -1):
        np.testing.assert_allclose(sw_shift(n, t), np.linalg.matrix_power(s if t > 0 else s.T, abs(t)), atol=1e-12)
    # a band-limited signal (no Nyquist content) is translated exactly by fractional t
    a = np.arange(n)
    f = lambda r: np.cos(2 * np.pi * r / n) + 0.5 * np.sin(2 * np.pi * 2 * r / n)  # noqa: E731
    np.testing.assert_allclose(sw_shift(n, 0.37) @ f(a), f(a + 0.37), atol=1e-12)


@pytest.mark.parametrize("n", [5, 7, 9])
def test_kernel_interpolates_for_odd_n(n):
    k = np.arange(n)
    for conv in ("paper", "exact"):
        q = sw_kernel(k, n, conv)
        np.testing.assert_allclose(q, np.eye(n)[0], atol=1e-13)


@pytest.mark.parametrize("n", [6, 8, 14])
def test_kernel_for_even_n_paper_fails_exact_holds(n):
    k = np.arange(n)
    paper = sw_kernel(k, n, "paper")
    np.testing.assert_allclose(paper[0], 1 - 1 / n, atol=1e-13)
    # the missing Nyquist term cos(pi k)/n: Q(k) = delta_k - (-1)^k / n, so |Q(k)| = 1/n off the origin
    np.testing.assert_allclose(paper, np.eye(n)[0] - (-1.0) ** k / n, atol=1e-13)
    np.testing.assert_allclose(sw_kernel(k, n, "exact"), np.eye(n)[0], atol=1e-13)
    # the derivative of the exact kernel, sampled on the grid, is the paper's (Nyquist-free) derivative
    eps = 1e-6
    dq = (sw_kernel(k + eps, n, "exact") - sw_kernel(k - eps, n, "exact")) / (2 * eps)
    np.testing.assert_allclose(dq, sw_derivative_paper(n)[:, 0], atol=1e-7)


# ---------------------------------------------------------------- generators (30–32)


@pytest.mark.parametrize("n", [7, 8, 11])
def test_rotation_generator_is_skew_and_its_exponential_orthogonal(n):
    g = generator(n, "rotation")
    np.testing.assert_allclose(g, -g.T, atol=1e-12)
    a = expm_base(g, np.pi / 8).to_dense().numpy()
    np.testing.assert_allclose(a @ a.T, np.eye(n * n), atol=1e-12)
    base = expm_base(g, np.pi / 8)
    np.testing.assert_allclose(base.inverse().to_dense().numpy(), a.T, atol=1e-12)


@pytest.mark.parametrize("n", [5, 6, 7, 8])
def test_rotation_and_scaling_generators_commute_with_rot90(n):
    r = rot90_permutation(n).to_dense().numpy()
    for name in ("rotation", "scaling"):
        g = generator(n, name)
        np.testing.assert_allclose(r @ g, g @ r, atol=1e-12)
    g = generator(n, "dx")  # a single derivative does not: rot90 maps d/dx to d/dy
    assert np.abs(r @ g - g @ r).max() > 0.5


def test_scaling_generator_is_not_skew():
    g = generator(9, "scaling")
    assert np.abs(g + g.T).max() > 1.0


def _blob(n: int, centre=(2.0, 0.0), widths=(1.5, 2.0)) -> np.ndarray:
    """A smooth anisotropic Gaussian near the centre (so rotating it changes it)."""
    x, y = coordinates(n)
    return np.exp(-((x - centre[0]) ** 2 / (2 * widths[0] ** 2) + (y - centre[1]) ** 2 / (2 * widths[1] ** 2)))


@pytest.mark.parametrize("n", [15, 21, 28])
def test_rotation_matches_scipy_rotate_on_smooth_blob(n):
    img = _blob(n)
    theta = np.pi / 8
    out = sl.expm(theta * generator(n, "rotation")) @ img
    ref = ndimage.rotate(img.reshape(n, n), np.degrees(theta), reshape=False, order=3, mode="constant").ravel()
    assert np.linalg.norm(ref - img) / np.linalg.norm(ref) > 0.2  # the rotation is visible
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 0.01
    quarter = sl.expm(np.pi / 2 * generator(n, "rotation")) @ img
    np.testing.assert_allclose(quarter, np.rot90(img.reshape(n, n)).ravel(), atol=2e-3)


def test_scaling_shrinks_content_by_exp_minus_t():
    n = 21
    x, _ = coordinates(n)
    img = _blob(n, centre=(4.0, 0.0), widths=(2.0, 2.0))
    out = sl.expm(0.3 * generator(n, "scaling")) @ img
    np.testing.assert_allclose((x * out).sum() / out.sum(), 4.0 * np.exp(-0.3), rtol=0.02)


@pytest.mark.parametrize("shape", [(6, 6), (7, 5)])
def test_generators_annihilate_constants_and_bases_fix_them(shape):
    ones = np.ones(shape[0] * shape[1])
    for name in GENERATOR_NAMES:
        np.testing.assert_allclose(generator(shape, name) @ ones, 0.0, atol=1e-10)
    alpha = np.random.default_rng(1).standard_normal(6)
    np.testing.assert_allclose(affine_generator(shape, alpha) @ ones, 0.0, atol=1e-10)
    base = expm_base(affine_generator(shape, 0.1 * alpha), 1.0)
    np.testing.assert_allclose(base(torch.as_tensor(ones)).numpy(), ones, atol=1e-10)


def test_affine_generator_is_the_weighted_sum_of_eq2():
    shape = (5, 6)
    x, y = coordinates(shape)
    dx, dy = derivative_2d(shape, 0), derivative_2d(shape, 1)
    alpha = [0.5, -1.0, 2.0, 0.25, 1.5, -0.75]
    expected = (alpha[0] * dx + alpha[1] * x[:, None] * dx + alpha[2] * y[:, None] * dx + alpha[3] * dy
                + alpha[4] * x[:, None] * dy + alpha[5] * y[:, None] * dy)
    np.testing.assert_allclose(affine_generator(shape, alpha), expected, atol=1e-12)
    with pytest.raises(ValueError, match="6 coefficients"):
        affine_generator(shape, [1.0, 2.0])


def test_2d_derivative_of_odd_grid_exponentiates_to_grid_shift():
    shape = (5, 7)
    for axis in (0, 1):
        a = sl.expm(derivative_2d(shape, axis))
        np.testing.assert_allclose(a, grid_shift(shape, axis).to_dense().numpy(), atol=1e-12)


def test_dense_base_powers_and_inverse():
    base = make_base("scaling", 6, 0.2)
    m = base.to_dense()
    x = torch.randn(3, 36, dtype=torch.float64)
    np.testing.assert_allclose(base(x, power=3).numpy(), (x @ torch.linalg.matrix_power(m, 3).T).numpy(), atol=1e-10)
    np.testing.assert_allclose(base(base(x, power=2), power=-2).numpy(), x.numpy(), atol=1e-10)
    np.testing.assert_allclose(base.power(-2).to_dense().numpy(), torch.linalg.matrix_power(m, -2).numpy(),
                               atol=1e-10)
