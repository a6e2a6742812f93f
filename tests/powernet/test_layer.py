"""PowerLayer algebra and equivariance (notes part D, items 19, 20, 22–25, 33)."""

import numpy as np
import pytest
import scipy.linalg as sl
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.nn.powernet import (
    DenseBase,
    PermutationBase,
    PowerLayer,
    cyclic_shift,
    grid_shift,
    make_base,
    power_set,
    rot90_permutation,
)

torch.set_default_dtype(torch.float32)


def _dense_random_base(d: int, seed: int) -> DenseBase:
    rng = np.random.default_rng(seed)
    m = np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d)
    return DenseBase(m)


def _layer(bases, c_in=1, c_out=1, k=5, seed=0, **kw) -> PowerLayer:
    g = torch.Generator().manual_seed(seed)
    return PowerLayer(bases, c_in, c_out, k, generator=g, dtype=torch.float64, **kw).double()


# ---------------------------------------------------------------- item 19: commutation with the base


@settings(max_examples=25, deadline=None)
@given(d=st.integers(2, 9), k=st.sampled_from([1, 3, 5, 7]), dil=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_power_series_commutes_with_any_base(d, k, dil, seed):
    base = _dense_random_base(d, seed)
    layer = _layer(base, k=k, seed=seed, dilation=dil, bias=None)
    w = layer.weight_matrix()[0, 0].detach()
    m = base.to_dense()
    scale = float(w.abs().max() * m.abs().max())
    torch.testing.assert_close(w @ m, m @ w, atol=1e-11 * scale, rtol=0)


def test_weight_matrix_is_the_laurent_polynomial():
    base = _dense_random_base(6, 3)
    layer = _layer(base, c_in=2, c_out=3, k=5, bias=None)
    m = base.to_dense()
    expected = sum(layer.weight[..., j, None, None] * torch.linalg.matrix_power(m, i)
                   for j, (i,) in enumerate(layer.power_list))
    torch.testing.assert_close(layer.weight_matrix(), expected, atol=1e-10, rtol=1e-10)
    x = torch.randn(4, 2, 6, dtype=torch.float64)
    torch.testing.assert_close(layer(x), torch.einsum("oiab,nib->noa", expected, x), atol=1e-10, rtol=1e-10)


def test_multi_base_product_commutes_with_each_base_when_they_commute():
    sx, sy = grid_shift(5, 0), grid_shift(5, 1)
    layer = _layer([sx, sy], k=3, bias=None)
    w = layer.weight_matrix()[0, 0].detach()
    for b in (sx, sy):
        m = b.to_dense()
        torch.testing.assert_close(w @ m, m @ w, atol=1e-12, rtol=0)


def test_multi_base_terms_apply_last_base_first():
    a, b = make_base("rotation", 5, 0.3), make_base("scaling", 5, 0.2)
    layer = _layer([a, b], powers=[(1, 1), (2, -1), (0, 2), (-1, 0)], bias=None)
    ma, mb = a.to_dense(), b.to_dense()
    p = lambda m, i: torch.linalg.matrix_power(m, i)  # noqa: E731
    terms = [p(ma, i) @ p(mb, j) for i, j in layer.power_list]
    x = torch.randn(3, 25, dtype=torch.float64)
    got = layer.terms(x)
    for t, term in enumerate(terms):
        torch.testing.assert_close(got[:, t], x @ term.T, atol=1e-10, rtol=1e-10)


# ---------------------------------------------------------------- item 20/21: shifts give circular convolution


@pytest.mark.parametrize("n,k", [(7, 5), (8, 3), (5, 5)])
def test_shift_layer_is_circulant_and_sums_rolls(n, k):
    layer = _layer(cyclic_shift(n), k=k, bias=None)
    w = layer.weight_matrix()[0, 0].detach()
    for a in range(n):
        torch.testing.assert_close(w[a], torch.roll(w[0], a), atol=1e-14, rtol=0)
    x = torch.randn(5, 1, n, dtype=torch.float64)
    expected = sum(layer.weight[0, 0, j] * torch.roll(x, -i, dims=-1) for j, (i,) in enumerate(layer.power_list))
    torch.testing.assert_close(layer(x), expected, atol=1e-13, rtol=0)


@pytest.mark.parametrize("shape,k", [((6, 6), 3), ((5, 7), 5)])
def test_two_shift_layer_is_circular_conv2d(shape, k):
    layer = _layer([grid_shift(shape, 0), grid_shift(shape, 1)], c_in=2, c_out=3, k=k)
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(4, 2, *shape, dtype=torch.float64)
    kernel = layer.weight.reshape(3, 2, k, k)
    p = k // 2
    ref = F.conv2d(F.pad(x, (p, p, p, p), mode="circular"), kernel, bias=layer.bias)
    torch.testing.assert_close(layer(x), ref, atol=1e-12, rtol=0)
    # gradients of the permutation fast path agree with conv2d
    x.requires_grad_(True)
    g = torch.randn_like(ref)
    ga = torch.autograd.grad(layer(x), x, g)[0]
    gb = torch.autograd.grad(F.conv2d(F.pad(x, (p, p, p, p), mode="circular"), kernel), x, g)[0]
    torch.testing.assert_close(ga, gb, atol=1e-12, rtol=0)


def test_permutation_fast_path_matches_generic_path():
    r = rot90_permutation(4)
    s = grid_shift(4, 1)
    layer = _layer([r, s], c_in=2, c_out=2, k=3)
    assert layer.table is not None
    x = torch.randn(3, 2, 16, dtype=torch.float64)
    torch.testing.assert_close(layer.terms(x), layer._terms_generic(x), atol=0, rtol=0)
    assert torch.autograd.gradcheck(lambda v: layer(v), (x[:1].clone().requires_grad_(True),))


@pytest.mark.parametrize("powers", [
    None,  # combine="sum": the shift series are gathered, the SW series step from the identity
    [(0, 0, i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)] + [(1, 0, 0, 0), (0, -2, 0, 0), (1, 0, 1, 0)],
    [(1, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 0)],  # terms out of the internal order
    [(2, 1, 0, 0), (1, 0, 0, 0)],  # nothing but stepped terms
])
def test_mixed_dense_and_permutation_bases_match_the_generic_path(powers):
    shape = (5, 4)
    bases = [make_base("rotation", shape, 0.4), make_base("scaling", shape, 0.1), grid_shift(shape, 0),
             grid_shift(shape, 1)]
    layer = _layer(bases, c_in=2, c_out=3, k=3, powers=powers, combine="sum")
    assert layer.table is not None  # the two trailing shifts are one gather
    x = torch.randn(3, 2, 20, dtype=torch.float64)
    torch.testing.assert_close(layer.terms(x), layer._terms_generic(x), atol=1e-12, rtol=0)
    w = layer.weight_matrix()
    torch.testing.assert_close(layer(x), torch.einsum("oiaj,nij->noa", w, x) + layer.bias[:, None], atol=1e-12,
                               rtol=0)
    assert torch.autograd.gradcheck(lambda v: layer(v), (x[:1].clone().requires_grad_(True),))


def test_dense_layer_gradcheck():
    layer = _layer(make_base("rotation", 4, 0.4), c_in=2, c_out=2, k=3, bias="full")
    x = torch.randn(2, 2, 16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: layer(v), (x,))


# ---------------------------------------------------------------- item 22/23: exact vs quasi equivariance


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).norm() / b.norm()).detach())


@pytest.mark.parametrize("n", [5, 6])
def test_rot90_layer_with_pointwise_nonlinearity_is_exactly_equivariant(n):
    r = rot90_permutation(n)
    layer = _layer(r, c_in=2, c_out=3, k=3, activation=torch.nn.LeakyReLU(0.2))
    with torch.no_grad():
        layer.bias.normal_()
    x = torch.randn(4, 2, n * n, dtype=torch.float64)
    assert _rel_err(layer(r(x)), r(layer(x))) < 1e-14


def test_rot90_equivariance_via_core_group():
    from symkit.groups import Group
    from symkit.reps import V, equivariance_error

    n = 4
    r = rot90_permutation(n)
    G = Group(discrete_generators=[r.to_dense().numpy()], name="C4")
    w = _layer(r, k=3).weight_matrix()[0, 0].detach().numpy()
    assert equivariance_error(w, V(G), V(G)) < 1e-14
    dense = np.random.default_rng(0).standard_normal((n * n, n * n))
    assert equivariance_error(dense, V(G), V(G)) > 0.1


def test_sw_rotation_layer_is_linear_equivariant_but_not_with_nonlinearity():
    n = 7
    a = make_base("rotation", n, np.pi / 8)
    x = torch.randn(6, 2, n * n, dtype=torch.float64)
    linear = _layer(a, c_in=2, c_out=3, k=5)
    with torch.no_grad():
        linear.bias.normal_()
    # P commutes with A and A fixes constants (channel bias): exact without the non-linearity
    assert _rel_err(linear(a(x)), a(linear(x))) < 1e-12
    nonlinear = _layer(a, c_in=2, c_out=3, k=5, activation=torch.nn.LeakyReLU(0.2))
    with torch.no_grad():
        nonlinear.bias.normal_()
    err = _rel_err(nonlinear(a(x)), a(nonlinear(x)))
    assert err > 0.05  # quasi-equivariant only; about 0.3 here
    # the same layer with the exact rot90 base and the same coefficients is exact
    r = rot90_permutation(n)
    exact = _layer(r, c_in=2, c_out=3, k=5, activation=torch.nn.LeakyReLU(0.2))
    exact.load_state_dict(nonlinear.state_dict())
    assert _rel_err(exact(r(x)), r(exact(x))) < 1e-14


def test_full_bias_breaks_equivariance_channel_bias_keeps_it():
    r = rot90_permutation(5)
    x = torch.randn(3, 1, 25, dtype=torch.float64)
    layer = _layer(r, k=3, bias="full")
    with torch.no_grad():
        layer.bias.normal_()
    assert _rel_err(layer(r(x)), r(layer(x))) > 0.05


# ---------------------------------------------------------------- item 24/25: parameter count and dilation


@pytest.mark.parametrize("bias,extra", [(None, 0), ("channel", 4), ("full", 4 * 36)])
def test_parameter_count(bias, extra):
    layer = PowerLayer(grid_shift(6, 0), 3, 4, 5, bias=bias)
    assert sum(p.numel() for p in layer.parameters()) == 5 * 3 * 4 + extra
    two = PowerLayer([grid_shift(6, 0), grid_shift(6, 1)], 3, 4, (5, 3), bias=None)
    assert two.num_terms == 15
    summed = PowerLayer([grid_shift(6, 0), grid_shift(6, 1), make_base("rotation", 6)], 3, 4, 5, combine="sum",
                        bias=None)
    assert summed.num_terms == 1 + 3 * 4 == summed.weight.shape[-1]


def test_dilation_places_taps_on_multiples():
    n = 11
    layer = _layer(cyclic_shift(n), k=5, dilation=2, bias=None)
    w = layer.weight_matrix()[0, 0].detach()
    row = w[0]
    taps = {int(j) for j in torch.nonzero(row.abs() > 0).flatten()}
    assert taps <= {0, 2, 4, n - 2, n - 4}
    x = torch.randn(2, 1, n, dtype=torch.float64)
    expected = sum(layer.weight[0, 0, j] * torch.roll(x, -2 * i, dims=-1) for j, (i,) in enumerate(layer.power_list))
    torch.testing.assert_close(layer(x), expected, atol=1e-13, rtol=0)
    dense = make_base("scaling", 4, 0.1)
    dl = _layer(dense, k=3, dilation=3, bias=None)
    m3 = torch.linalg.matrix_power(dense.to_dense(), 3)
    v = torch.randn(2, 16, dtype=torch.float64)
    t = dl.terms(v)
    torch.testing.assert_close(t[:, 2], v @ m3.T, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(t[:, 0], v @ torch.linalg.inv(m3).T, atol=1e-10, rtol=1e-10)


def test_power_set_shapes():
    assert power_set(3, 1) == [(-1,), (0,), (1,)]
    assert len(power_set((3, 5), 2)) == 15
    assert power_set(3, 2, "sum") == [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]
    with pytest.raises(ValueError, match="odd"):
        power_set(4, 1)
    with pytest.raises(ValueError, match="combine"):
        power_set(3, 1, "concat")


# ---------------------------------------------------------------- item 33: full range spans E_trans


def _commutant_basis(gens: list[np.ndarray]) -> np.ndarray:
    """Orthonormal basis of {W : g W = W g} (row-major vec), by a nullspace independent of the layer."""
    d = gens[0].shape[0]
    eye = np.eye(d)
    rows = [np.kron(g, eye) - np.kron(eye, g.T) for g in gens]
    return sl.null_space(np.vstack(rows))


@pytest.mark.parametrize("n", [3, 4])
def test_full_range_shift_layer_spans_the_translation_commutant(n):
    sx, sy = grid_shift(n, 0), grid_shift(n, 1)
    layer = _layer([sx, sy], powers=[(i, j) for i in range(n) for j in range(n)], bias=None)
    cols = []
    for t in range(layer.num_terms):
        with torch.no_grad():
            layer.weight.zero_()
            layer.weight[0, 0, t] = 1.0
        cols.append(layer.weight_matrix()[0, 0].detach().numpy().ravel())
    span = np.stack(cols, 1)
    assert np.linalg.matrix_rank(span) == n * n
    e = _commutant_basis([sx.to_dense().numpy(), sy.to_dense().numpy()])
    assert e.shape[1] == n * n
    # same subspace: projecting each onto the other loses nothing
    q, _ = np.linalg.qr(span)
    np.testing.assert_allclose(q @ (q.T @ e), e, atol=1e-10)
    np.testing.assert_allclose(e @ (e.T @ q), q, atol=1e-10)


def test_full_range_shift_layer_matches_core_equivariant_basis():
    from symkit.groups import Group
    from symkit.reps import V

    n = 3
    sx, sy = grid_shift(n, 0), grid_shift(n, 1)
    G = Group(discrete_generators=[sx.to_dense().numpy(), sy.to_dense().numpy()], name="Z3xZ3")
    q = np.asarray((V(G) >> V(G)).equivariant_basis())
    assert q.shape == (n**4, n**2)
    layer = _layer([sx, sy], powers=[(i, j) for i in range(n) for j in range(n)], bias=None)
    w = layer.weight_matrix()[0, 0].detach().numpy().ravel()
    np.testing.assert_allclose(q @ (q.T @ w), w, atol=1e-10)


# ---------------------------------------------------------------- input validation


def test_layer_rejects_bad_arguments():
    s = cyclic_shift(5)
    with pytest.raises(TypeError, match="Base"):
        PowerLayer(np.eye(5), 1, 1)
    with pytest.raises(ValueError, match="same size"):
        PowerLayer([s, cyclic_shift(6)], 1, 1)
    with pytest.raises(ValueError, match="in_channels"):
        PowerLayer(s, 0, 1)
    with pytest.raises(ValueError, match="bias"):
        PowerLayer(s, 1, 1, bias="pixel")
    with pytest.raises(ValueError, match="2-tuples"):
        PowerLayer([s, s], 1, 1, powers=[(1,)])
    with pytest.raises(ValueError, match="duplicates"):
        PowerLayer(s, 1, 1, powers=[(1,), (1,)])
    with pytest.raises(ValueError, match="dilation"):
        PowerLayer(s, 1, 1, dilation=0)
    layer = PowerLayer(s, 2, 1, 3)
    with pytest.raises(ValueError, match="expects input"):
        layer(torch.zeros(4, 3, 5))
    with pytest.raises(ValueError, match="5 pixels"):
        layer(torch.zeros(4, 2, 6))


def test_image_shaped_input_and_float32_default():
    layer = PowerLayer([grid_shift(4, 0), grid_shift(4, 1)], 1, 2, 3)
    y = layer(torch.randn(3, 1, 4, 4))
    assert y.shape == (3, 2, 4, 4) and y.dtype == torch.float32
    assert isinstance(PermutationBase([1, 0]).power(3), PermutationBase)


# ---------------------------------------------------------------- term normalisation


def test_term_gains_are_one_for_orthogonal_bases_and_rms_gains_otherwise():
    for base in (grid_shift(6, 0), rot90_permutation(6), make_base("rotation", 6, 0.4)):
        layer = PowerLayer(base, 1, 1, 5, normalize_terms=True, dtype=torch.float64)
        assert torch.equal(layer.term_gains(), torch.ones(5, dtype=torch.float64))
        assert torch.equal(layer.effective_weight(), layer.weight)
    base = make_base("scaling", 7, 0.2)
    layer = PowerLayer(base, 2, 3, 5, normalize_terms=True, dtype=torch.float64).double()
    m = base.to_dense()
    exact = torch.stack([torch.linalg.matrix_power(m, i).norm() / 7 for (i,) in layer.power_list])
    torch.testing.assert_close(layer.term_gains(probes=4096), exact, rtol=0.1, atol=0)
    assert exact.max() > 1.5  # the SW scaling base is far from orthogonal
    # the layer is still a Laurent series in the base, with coefficients theta / g
    theta = layer.weight / layer.term_gains()
    expected = sum(theta[..., j, None, None] * torch.linalg.matrix_power(m, i)
                   for j, (i,) in enumerate(layer.power_list))
    torch.testing.assert_close(layer.weight_matrix(), expected, atol=1e-10, rtol=1e-10)


def test_uniform_init_matches_conv2d_bounds():
    layer = PowerLayer([grid_shift(6, 0), grid_shift(6, 1)], 3, 40, 3, init="uniform",
                       generator=torch.Generator().manual_seed(0))
    bound = 1 / (3 * 9) ** 0.5
    conv = torch.nn.Conv2d(3, 40, 3)
    assert conv.weight.abs().max() <= bound + 1e-7
    for p in (layer.weight, layer.bias):
        assert p.abs().max() <= bound
        assert p.abs().max() > 0.8 * bound  # spread over the whole interval
    with pytest.raises(ValueError, match="init"):
        PowerLayer(grid_shift(6, 0), 1, 1, init="orthogonal")
