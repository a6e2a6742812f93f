"""symkit's irreps of SO(3) and O(3) against e3nn itself: generators, D-matrices, parity, Irreps strings both ways,
ranks against e3nn's weight counts, an EMLP on irreps reps and an e3nn network checked by symkit."""

import contextlib

import e3nn
import numpy as np
import pytest
import scipy.linalg
import torch
from e3nn import nn as e3nn_nn
from e3nn import o3

from symkit.groups import SO, O
from symkit.nn import EMLP
from symkit.reps import CustomRep, Irrep, PseudoScalar, Scalar, SumRep, T, V, from_irreps, irrep_generators, to_irreps
from symkit.testing import assert_equivariant, default_tolerance

#: the generators of rotations about x, y, z of R^3 ((L_k)_ij = -eps_kij); e3nn's so3_generators(1)
L1 = np.array([[[0, 0, 0], [0, 0, -1], [0, 1, 0]], [[0, 0, 1], [0, 0, 0], [-1, 0, 0]],
               [[0, -1, 0], [1, 0, 0], [0, 0, 0]]], dtype=np.float64)


@contextlib.contextmanager
def float64_default():
    """e3nn builds its constants in torch's default dtype: float64 while inside."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def e3nn_D(irreps, g):
    with float64_default():  # e3nn's generators follow the default dtype
        return o3.Irreps(irreps).D_from_matrix(torch.as_tensor(g, dtype=torch.float64)).numpy()


@pytest.fixture(scope="module")
def elements():
    """Rotations and rotoreflections of O(3), both present."""
    gs = O(3).samples(8, seed=3)
    dets = np.sign(np.linalg.det(gs))
    assert (dets > 0).any() and (dets < 0).any()
    return gs


def test_e3nn_version_has_the_xyz_degree_one_basis():
    # the basis convention symkit follows: e3nn's degree-1 irrep acts on (x, y, z) by R itself (e3nn >= 0.2.2)
    R = SO(3).samples(1, seed=0)[0]
    assert np.abs(e3nn_D("1o", R) - R).max() < 1e-14, e3nn.__version__


@pytest.mark.parametrize("l", range(7))
def test_generators_equal_e3nn(l):
    with float64_default():
        ref = o3.so3_generators(l).numpy()
    assert irrep_generators(l).shape == (3, 2 * l + 1, 2 * l + 1)
    assert np.abs(irrep_generators(l) - ref).max() < 1e-12
    rep = Irrep(l, 1, SO(3))
    for k in range(3):  # d rho of the rotation about axis k is e3nn's generator k
        assert np.abs(rep.drho(L1[k]) - ref[k]).max() < 1e-12


@pytest.mark.parametrize("l", range(7))
@pytest.mark.parametrize("p", [1, -1])
def test_D_matrices_equal_e3nn(l, p, elements):
    rep = Irrep(l, p, O(3))
    label = f"{l}{'e' if p == 1 else 'o'}"
    for g in elements:
        D = rep.rho(g)
        assert np.abs(D - e3nn_D(label, g)).max() < 1e-10
        assert np.abs(D @ D.T - np.eye(2 * l + 1)).max() < 1e-13


def test_rho_and_drho_agree_and_compose(elements):
    rep = Irrep(3, -1, O(3))
    A = np.einsum("k,kij->ij", [0.3, -1.1, 0.7], L1)
    assert np.abs(rep.rho(scipy.linalg.expm(A)) - scipy.linalg.expm(rep.drho(A))).max() < 1e-12
    g, h = elements[0], elements[1]
    assert np.abs(rep.rho(g @ h) - rep.rho(g) @ rep.rho(h)).max() < 1e-12


def test_a_sum_acts_in_e3nns_layout(elements):
    s = "2x0e + 1x1o + 3x2e + 1x0o + 2x3o + 1x1e"
    rep = from_irreps(s, O(3))
    assert rep.size == o3.Irreps(s).dim == 2 + 3 + 15 + 1 + 14 + 3
    for g in elements[:4]:
        assert np.abs(rep.rho(g) - e3nn_D(s, g)).max() < 1e-10


def test_parity():
    minus = -np.eye(3)
    for l in range(4):
        for p in (1, -1):
            assert np.abs(Irrep(l, p, O(3)).rho(minus) - p * np.eye(2 * l + 1)).max() < 1e-14
    refl = np.diag([-1.0, 1.0, 1.0])  # O(3)'s discrete generator
    assert np.abs(Irrep(2, -1, O(3)).rho(refl) + Irrep(2, 1, O(3)).rho(refl)).max() == 0
    assert Irrep(2, "y", O(3)) == Irrep(2, "e", O(3)) and Irrep(1, "y", O(3)) == Irrep(1, -1, O(3))
    g = O(3).samples(3, seed=5)
    for h in g:  # degree 1, odd parity: V's own matrices (e3nn's basis is x, y, z)
        assert np.abs(Irrep(1, "o", O(3)).rho(h) - V(O(3)).rho(h)).max() < 1e-15


@pytest.mark.parametrize("s", ["16x0e + 8x1o + 2x2e", "1o", "3x2o+1x0o+2x1e", "1x0e + 2x0o + 1x4e + 1x3o", ""])
def test_strings_round_trip(s):
    rep = from_irreps(s, O(3))
    assert rep.size == o3.Irreps(s).dim
    assert to_irreps(rep) == str(o3.Irreps(s))
    assert from_irreps(o3.Irreps(s), O(3)) == rep  # an e3nn Irreps object reads the same
    assert from_irreps(to_irreps(rep), O(3)) == rep


def test_string_forms():
    G = O(3)
    assert from_irreps("16x0e + 8x1o + 2x2e", G) == 16 * Scalar + 8 * Irrep(1, -1, G) + 2 * Irrep(2, 1, G)
    assert from_irreps("2e", G) == Irrep(2, 1, G)
    assert from_irreps(" 2 x 1o + 0x2e +1x1o ", G) == 3 * Irrep(1, -1, G)  # 0x terms drop, neighbours merge
    assert from_irreps("2x1o")(G) == 2 * Irrep(1, -1, G)  # unbound until called with a group
    rep = V(G) + Scalar + PseudoScalar(G) + Irrep(1, -1, G)
    assert to_irreps(rep) == "1x1o+1x0e+1x0o+1x1o"
    assert to_irreps(2 * V(SO(3)) + Irrep(1, "o", SO(3))) == "3x1o"
    for g in O(3).samples(3, seed=7):  # V, PseudoScalar and Scalar are what e3nn's labels say
        assert np.abs(rep.rho(g) - e3nn_D(to_irreps(rep), g)).max() < 1e-12


@pytest.mark.parametrize("bad", ["16x0e + 8x1", "2x1z", "1o + + 2e", "x1o", "-1x1o", "1.5x0e", "1o +"])
def test_bad_strings_name_the_string(bad):
    with pytest.raises(ValueError, match="cannot read") as info:
        from_irreps(bad, O(3))
    assert repr(bad) in str(info.value) and "[<mul>x]<l><parity>" in str(info.value)


def test_bad_inputs():
    with pytest.raises(TypeError, match=r"\(mul, \(l, p\)\) pairs"):
        from_irreps([(2, 1)], O(3))
    with pytest.raises(TypeError, match="Irreps string"):
        from_irreps(3, O(3))
    with pytest.raises(ValueError, match="parity must be"):
        Irrep(1, 2, O(3))
    with pytest.raises(ValueError, match=r"subgroup of O\(3\) on R\^3"):
        from_irreps("1o", SO(2))
    with pytest.raises(ValueError, match="not an irrep of O\\(3\\).*tensor product"):
        to_irreps(Scalar + T(2, 0, O(3)))
    with pytest.raises(ValueError, match="orthogonal 3x3"):
        Irrep(2, 1, O(3)).rho(2 * np.eye(3))
    with pytest.raises(ValueError, match="antisymmetric"):
        Irrep(2, 1, O(3)).drho(np.eye(3))
    with pytest.raises(ValueError, match="not bound"):
        Irrep(2, 1).rho(np.eye(3))


@pytest.mark.parametrize("a, b", [
    ("2x0e + 1x1o", "3x0e + 2x1o + 1x1e"),
    ("3x0e + 2x1o + 1x2e + 1x0o", "1x0e + 2x1o + 3x2e + 2x2o + 1x0o"),
    ("4x0e + 3x1e + 2x2o + 1x3o", "2x0e + 2x1e + 3x2o + 1x0o + 2x3o"),
])
def test_ranks_equal_e3nn_weight_counts(a, b):
    with float64_default():
        count = o3.Linear(a, b).weight_numel
    assert (from_irreps(a, O(3)) >> from_irreps(b, O(3))).rank() == count
    # bound to SO(3) the parity is a label only: the count of the same strings with every parity even
    even = [s.replace("o", "e") for s in (a, b)]
    with float64_default():
        count_so3 = o3.Linear(*even).weight_numel
    assert (from_irreps(a, SO(3)) >> from_irreps(b, SO(3))).rank() == count_so3 > count


def test_emlp_on_irreps_reps_passes_the_float64_tolerance():
    G = O(3)
    rep_in = from_irreps("2x0e + 2x1o + 1x2e + 1x0o", G)
    rep_out = from_irreps("1x0e + 1x1o + 1x2e + 1x3o", G)
    hidden = from_irreps("4x0e + 2x1o + 2x1e + 1x2e + 1x2o", G)
    torch.manual_seed(0)
    model = EMLP(rep_in, rep_out, G, ch=hidden, num_layers=1, dtype=torch.float64)
    with torch.no_grad():
        for q in model.parameters():
            q.normal_()
        x = torch.randn(4, rep_in.size, dtype=torch.float64)
        assert model(x).abs().mean() > 0.1  # not trivially equivariant
    assert model.check_equivariance() <= default_tolerance(torch.float64)


def test_an_e3nn_network_is_checked_from_its_irreps_strings():
    irreps_in = "4x0e + 2x1o + 1x2e"
    with float64_default():
        torch.manual_seed(0)
        gate = e3nn_nn.Gate("4x0e + 1x0o", [torch.tanh, torch.tanh], "3x0e", [torch.sigmoid], "2x1o + 1x2e")
        net = torch.nn.Sequential(o3.Linear(irreps_in, gate.irreps_in), gate,
                                  o3.TensorSquare(gate.irreps_out, "2x0e + 1x0o + 1x1o + 1x1e + 1x2e + 1x2o"))
    irreps_out = str(net[-1].irreps_out)
    G = O(3)
    err = assert_equivariant(net, from_irreps(irreps_in, G), from_irreps(irreps_out, G))  # float64 tolerance
    assert 0 <= err <= default_tolerance(torch.float64)
    with pytest.raises(AssertionError, match="not equivariant"):  # the wrong parity of one input is caught
        assert_equivariant(net, from_irreps("4x0e + 2x1e + 1x2e", G), from_irreps(irreps_out, G))


def test_custom_rep_with_a_nonfinite_derived_drho_names_the_rep_and_drho_fn():
    G = SO(3)
    # e3nn's D through its Euler angles: the JVP at the identity is nan
    rep = CustomRep(G, lambda M: o3.Irrep(2, 1).D_from_matrix(M), 5, "e3nnD2")
    with pytest.raises(ValueError, match=r"CustomRep e3nnD2\(SO\(3\)\).*not finite.*drho_fn") as info:
        rep.rank()
    assert "\n" not in str(info.value)
    fixed = CustomRep(G, lambda M: o3.Irrep(2, 1).D_from_matrix(M), 5, "e3nnD2fixed",
                      drho_fn=lambda A: torch.as_tensor(Irrep(2, 1, G).drho(A.numpy())))
    assert fixed.rank() == 0 and (fixed >> Irrep(2, 1, G)).rank() == 1
    broken = CustomRep(G, lambda M: M, 3, "nanD", drho_fn=lambda A: A * float("nan"))
    with pytest.raises(ValueError, match=r"CustomRep nanD\(SO\(3\)\): drho_fn returned non-finite"):
        broken.drho(G.lie_algebra[0])


def test_sum_rep_of_irreps_is_a_sum():
    rep = from_irreps("2x0e + 1x2e", O(3))
    assert isinstance(rep, SumRep) and rep.parts == ((Scalar, 2), (Irrep(2, 1, O(3)), 1))
    assert Irrep(2, 1, O(3)).restrict(SO(3)) == Irrep(2, 1, SO(3))
    assert Irrep(2, 1, O(3)).T == Irrep(2, 1, O(3))
