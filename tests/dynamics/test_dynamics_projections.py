"""Projections onto E: the algebra (notes D.1-5), the fast cases against Lemma 2 (D.6, 7, 10), dimensions (D.8, 9)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.actions import (
    CyclicTranslations1D,
    CyclicTranslations2D,
    GroupAction,
    Permutations,
    Rotations90,
    TranslationsRotations,
    act,
    lift,
)
from symkit.dynamics import (
    LayerSpec,
    basis_projection,
    c4_projection,
    dim_E,
    dim_L,
    equality_patterns,
    fft_projection_1d,
    fft_projection_2d,
    group_average,
    pattern_projection,
    project,
    project_vector,
    relative_dimension,
    translation_projection_1d,
    translation_projection_2d,
)
from symkit.groups import Group, Z

TOL = 1e-12


def _actions(n: int = 4):
    return {
        "trans": CyclicTranslations2D(n),
        "trans1d": CyclicTranslations1D(n, 1),
        "trans1d0": CyclicTranslations1D(n, 0),
        "rot": Rotations90(n),
        "transrot": TranslationsRotations(n),
        "sym_matrix": Permutations(4, "matrix"),
        "sym_vector": Permutations(5, "vector"),
        "core_Z5": GroupAction(Z(5)),
    }


def _specs(action, c_in=2, c_out=3):
    return {
        "hom": LayerSpec(action, action, c_in, c_out),
        "functional": LayerSpec(action, action.trivial(), c_in, c_out),
        "vector": LayerSpec(action.trivial(), action, c_in, c_out),
    }


CASES = [(a, s) for a in _actions() for s in ("hom", "functional", "vector")]


def _rand(spec, seed):
    return torch.randn(spec.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _inner(a, b):
    return float((a * b).sum())


@pytest.mark.parametrize("name,kind", CASES)
def test_fast_and_basis_projection_equal_group_average(name, kind):
    # D.6, D.10, C.2: every specialised projection agrees with Lemma 2's group average (float64)
    spec = _specs(_actions()[name])[kind]
    A = _rand(spec, 0)
    ref = group_average(A, spec)
    assert (project(A, spec, "auto") - ref).abs().max() < TOL
    assert (basis_projection(A, spec) - ref).abs().max() < TOL
    # and the result is not the input: the test would fail for an identity "projection"
    assert (ref - A).norm() > 0.1 * A.norm()


@pytest.mark.parametrize("name,kind", CASES)
def test_projection_algebra(name, kind):
    # D.1 idempotent, D.2 self-adjoint, D.3 orthogonal, D.4 range equivariant, D.5 identity on E
    action = _actions()[name]
    spec = _specs(action)[kind]
    A, B = _rand(spec, 1), _rand(spec, 2)
    PA, PB = project(A, spec), project(B, spec)
    assert (project(PA, spec) - PA).abs().max() < TOL
    assert abs(_inner(PA, B) - _inner(A, PB)) < TOL * A.numel()
    assert abs(_inner(A - PA, PB)) < TOL * A.numel()
    for g in action.generators():
        assert (lift(PA, g, spec.action_in, spec.action_out) - PA).abs().max() < TOL
    assert (project(PA + PB, spec) - (PA + PB)).abs().max() < TOL


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["trans", "trans1d", "rot", "transrot", "sym_matrix"]),
    a=st.floats(-3, 3),
    b=st.floats(-3, 3),
    seed=st.integers(0, 10_000),
)
def test_projection_is_linear_and_contracts(name, a, b, seed):
    spec = _specs(_actions(3 if name != "sym_matrix" else 4)[name], 1, 2)["hom"]
    A, B = _rand(spec, seed), _rand(spec, seed + 1)
    lhs = project(a * A + b * B, spec)
    rhs = a * project(A, spec) + b * project(B, spec)
    assert (lhs - rhs).abs().max() < 1e-11 * (1 + abs(a) + abs(b))
    # an orthogonal projection never increases the norm, and ||A||^2 = ||PA||^2 + ||A - PA||^2
    PA = project(A, spec)
    assert PA.norm() <= A.norm() * (1 + 1e-12)
    assert abs(float(A.norm() ** 2 - PA.norm() ** 2 - (A - PA).norm() ** 2)) < 1e-10 * float(A.norm() ** 2)


@pytest.mark.parametrize("n", [4, 5, 6])
def test_fft_2d_equals_group_average(n):
    # D.6: FFT diagonal extraction (Eq. 42) == average over Z_n^2, to 5e-16-ish
    spec = LayerSpec(CyclicTranslations2D(n), CyclicTranslations2D(n))
    A = _rand(spec, n)
    assert (fft_projection_2d(A) - group_average(A, spec)).abs().max() < 1e-14


def test_fft_2d_result_is_a_circular_convolution():
    n = 5
    spec = LayerSpec(CyclicTranslations2D(n), CyclicTranslations2D(n))
    P = fft_projection_2d(_rand(spec, 3))[0, 0]
    x = torch.randn(n, n, dtype=torch.float64)
    y = torch.einsum("abcd,cd->ab", P, x)
    h = P[:, :, 0, 0]  # kernel: response at (a, b) to a delta at the origin
    conv = sum(h[i, j] * torch.roll(x, (i, j), (0, 1)) for i in range(n) for j in range(n))
    assert (y - conv).abs().max() < 1e-12


def test_fft_1d_equals_group_average_on_both_axes():
    for axis in (0, 1):
        spec = LayerSpec(CyclicTranslations1D(5, axis), CyclicTranslations1D(5, axis))
        A = _rand(spec, axis)
        assert (fft_projection_1d(A, axis) - group_average(A, spec)).abs().max() < 1e-14


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_translation_projections_are_the_group_averages_and_the_papers_ffts(n):
    """The wrapped-diagonal means that ``project`` uses for Z_n^2 and Z_n are Lemma 2's averages (float64 rounding)
    and Eqs. 42 and 64's FFT projections, with channels and on both axes."""
    spec = LayerSpec(CyclicTranslations2D(n), CyclicTranslations2D(n), c_in=2, c_out=3)
    A = _rand(spec, n)
    P = translation_projection_2d(A)
    assert P.shape == A.shape
    assert (P - group_average(A, spec)).abs().max() < 1e-14
    assert (P - fft_projection_2d(A)).abs().max() < 1e-14
    for axis in (0, 1):
        spec = LayerSpec(CyclicTranslations1D(n, axis), CyclicTranslations1D(n, axis), c_in=2, c_out=3)
        A = _rand(spec, n + axis)
        P = translation_projection_1d(A, axis)
        assert P.shape == A.shape
        assert (P - group_average(A, spec)).abs().max() < 1e-14
        assert (P - fft_projection_1d(A, axis)).abs().max() < 1e-14
        assert (project(A, spec) - P).abs().max() == 0  # what project() returns for Z_n


def test_translation_projections_are_differentiable_and_refuse_other_shapes():
    A = torch.randn(2, 1, 3, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(translation_projection_2d, (A,))
    assert torch.autograd.gradcheck(lambda a: translation_projection_1d(a, 0), (A,))
    with pytest.raises(ValueError, match=r"expected \(\.\.\., n, n, n, n\), got \(3, 3, 4, 3\)"):
        translation_projection_2d(torch.zeros(3, 3, 4, 3))
    with pytest.raises(ValueError, match="axis must be 0 or 1, got 2"):
        translation_projection_1d(torch.zeros(3, 3, 3, 3), 2)


def test_c4_and_translation_projections_commute_to_semidirect_product():
    # D.7: Pi_C4 Pi_T = Pi_T Pi_C4 = Pi_{Z_n^2 x| C4}
    for n in (4, 5):
        spec = LayerSpec(TranslationsRotations(n), TranslationsRotations(n))
        A = _rand(spec, n)
        ref = group_average(A, spec)
        assert (c4_projection(fft_projection_2d(A)) - ref).abs().max() < 1e-14
        assert (fft_projection_2d(c4_projection(A)) - ref).abs().max() < 1e-14


@pytest.mark.parametrize("n,count", [(2, 8), (3, 14), (4, 15), (5, 15)])
def test_maron_basis_size_and_projection(n, count):
    # D.8 (S_n on R^{n x n}: 15 / 14 / 8) and D.10 (15-element basis == brute-force S_n average)
    assert equality_patterns(n, 4)[1] == count
    act_ = Permutations(n, "matrix")
    spec = LayerSpec(act_, act_)
    assert dim_E(spec) == count
    if n <= 5:
        A = _rand(spec, n)
        assert (pattern_projection(A, n, 4) - group_average(A, spec)).abs().max() < TOL


def test_s_n_functional_is_diagonal_and_off_diagonal_mean():
    n = 5
    act_ = Permutations(n, "matrix")
    spec = LayerSpec(act_, act_.trivial())
    A = _rand(spec, 0)
    eye = torch.eye(n, dtype=torch.float64)
    w = A[0, 0]
    closed = (w * eye).sum() / n * eye + (w * (1 - eye)).sum() / (n * n - n) * (1 - eye)
    assert (group_average(A, spec)[0, 0] - closed).abs().max() < TOL
    assert dim_E(spec) == 2


@pytest.mark.parametrize("n", [4, 5])
def test_dimensions_of_equivariant_maps(n):
    # D.8, closed forms for even and odd n; core rank and character formula agree
    even = n % 2 == 0
    expected = {
        "rot": (n**4 // 4 if even else (n**4 + 3) // 4, n**2 // 4 if even else (n**2 + 3) // 4),
        "trans": (n**2, 1),
        "trans1d": (n**3, n),
        "transrot": ((n**2 + 8) // 4 if even else (n**2 + 3) // 4, 1),
    }
    for name, (hom, fun) in expected.items():
        action = _actions(n)[name]
        specs = _specs(action, 1, 1)
        for kind, value in (("hom", hom), ("functional", fun)):
            assert dim_E(specs[kind]) == value, (name, kind)
            assert dim_E(specs[kind], "character") == value, (name, kind)


def test_relative_dimensions_of_the_paper_architecture():
    # D.9: TranslationNet(ns=[1, 32, 32], n=14) early layers (two image layers + the invariant layer)
    n = 14
    ratios = {}
    for name, action in {
        "trans": CyclicTranslations2D(n),
        "trans1d": CyclicTranslations1D(n, 1),
        "rot": Rotations90(n),
        "transrot": TranslationsRotations(n),
    }.items():
        specs = [
            LayerSpec(action, action, 1, 32),
            LayerSpec(action, action, 32, 32),
            LayerSpec(action, action.trivial(), 32, 32),
        ]
        ratios[name] = relative_dimension(specs)
        assert sum(dim_L(s) for s in specs) == 32 * 196**2 + 32 * 32 * 196**2 + 32 * 32 * 196
    # the invariant layer of Rot has n^2/4 = 49 of 196 dims, which keeps the ratio exactly 1/4
    assert ratios["rot"] == pytest.approx(0.25, abs=1e-15)
    assert ratios["trans"] == pytest.approx(1 / 196, rel=1e-12)
    assert ratios["trans1d"] == pytest.approx(1 / 14, rel=1e-12)
    assert ratios["transrot"] == pytest.approx(54_880 / 40_768_000, rel=1e-12)


def test_user_group_from_core_generators():
    # a user group Group(discrete_generators=[...]): the reflection i -> n-1-i of R^6
    n = 6
    refl = np.eye(n)[::-1].copy()
    action = GroupAction(Group(discrete_generators=[refl], name="flip"))
    assert action.order == 2
    spec = LayerSpec(action, action)
    A = _rand(spec, 0)
    P = project(A, spec)
    assert (P - group_average(A, spec)).abs().max() < TOL
    R = torch.as_tensor(refl)
    assert (R @ P[0, 0] - P[0, 0] @ R).abs().max() < TOL
    assert dim_E(spec) == 18  # (1/|G|) sum_g fix(g)^2 = (36 + 0) / 2: the flip fixes no point of {0..5}


def test_invariant_vector_projection_for_biases():
    # App. F / D.18: b -> mean_g rho(g) b is invariant and idempotent; translations give the mean
    action = CyclicTranslations2D(4)
    b = torch.randn(3, 4, 4, dtype=torch.float64)
    pb = project_vector(b, action)
    assert (pb - b.mean(dim=(1, 2), keepdim=True)).abs().max() < TOL
    rot = Rotations90(4)
    pr = project_vector(b, rot)
    for g in rot.elements():
        assert (act(rot, pr, g) - pr).abs().max() < TOL


def test_bad_inputs_raise_clear_errors():
    action = CyclicTranslations2D(4)
    spec = LayerSpec(action, action)
    with pytest.raises(ValueError, match="expected"):
        project(torch.zeros(1, 1, 4, 4), spec)
    with pytest.raises(ValueError, match="method"):
        project(torch.zeros(spec.shape), spec, "magic")
    with pytest.raises(ValueError, match="different groups"):
        LayerSpec(action, Rotations90(4))
    with pytest.raises(TypeError, match="PermAction"):
        LayerSpec("trans", action)
    with pytest.raises(ValueError, match="c_in"):
        LayerSpec(action, action, 0, 1)
    with pytest.raises(TypeError, match="int"):
        CyclicTranslations2D(2.5)
    with pytest.raises(ValueError, match="too many"):
        list(Permutations(10).elements())
    with pytest.raises(ValueError, match="finite permutation group"):
        from symkit.groups import SO

        GroupAction(SO(2))
