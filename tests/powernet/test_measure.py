"""PowerLayers measured with the core and measurement packages: exact for permutation bases, quasi-equivariant for
interpolated (Shannon–Whittaker) rotations."""

import math

import numpy as np
import pytest
import torch

from symkit.actions import get_transform
from symkit.datasets.rotated_digits import centred_digits
from symkit.groups import Group
from symkit.nn.powernet import PowerLayer, make_base, rot90_permutation
from symkit.reps import V, equivariance_error

N = 21


@pytest.fixture(scope="module")
def digits() -> torch.Tensor:
    x, _ = centred_digits(14, N, dtype=torch.float64)
    return x[:24]


def _layer(name: str, seed: int, n: int = N) -> PowerLayer:
    return PowerLayer(make_base(name, n), 1, 4, 5, generator=torch.Generator().manual_seed(seed),
                      activation=torch.nn.LeakyReLU(0.2), dtype=torch.float64).double()


def _flow_error(layer: PowerLayer, x: torch.Tensor, t: float) -> float:
    """||f(T_t x) - T_t f(x)|| / ||T_t f(x)|| for the bilinear rotation flow T_t of symkit.measure."""
    flow = get_transform("rotate", padding="zeros")
    with torch.no_grad():
        a = layer(flow.apply(x, t))
        b = flow.apply(layer(x), t)
    return float((a - b).norm() / b.norm())


def test_weights_lie_in_the_commutant_of_the_cyclic_group_of_the_base():
    n = 5
    for name in ("rot90", "shift_up"):
        base = make_base(name, n)
        G = Group(discrete_generators=[base.to_dense().numpy()], name=f"<{name}>")
        layer = PowerLayer(base, 1, 1, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64).double()
        w = layer.weight_matrix()[0, 0].detach().numpy()
        assert equivariance_error(w, V(G), V(G)) < 1e-13
    # the SW rotation base generates no finite group, but its layers still commute exactly with rot90
    sw = PowerLayer(make_base("rotation", n), 1, 1, 5, generator=torch.Generator().manual_seed(0),
                    dtype=torch.float64).double()
    C4 = Group(discrete_generators=[rot90_permutation(n).to_dense().numpy()], name="C4")
    assert equivariance_error(sw.weight_matrix()[0, 0].detach().numpy(), V(C4), V(C4)) < 1e-12


def test_assert_equivariant_on_layer_functions():
    import symkit.testing as testing
    n = 4
    r = rot90_permutation(n)
    G = Group(discrete_generators=[r.to_dense().numpy()], name="C4")
    layer = PowerLayer(r, 1, 1, 3, activation=torch.nn.LeakyReLU(0.2), generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64).double()
    with torch.no_grad():
        layer.bias.fill_(0.3)
    f = lambda z: layer(torch.as_tensor(z)[:, None, :])[:, 0, :].detach().numpy()  # noqa: E731
    assert testing.assert_equivariant(f, V(G), V(G), tol=1e-12) < 1e-12
    shift = PowerLayer(make_base("shift_up", n), 1, 1, 3, activation=torch.nn.LeakyReLU(0.2),
                       generator=torch.Generator().manual_seed(0), dtype=torch.float64).double()
    g = lambda z: shift(torch.as_tensor(z)[:, None, :])[:, 0, :].detach().numpy()  # noqa: E731
    with pytest.raises(AssertionError):
        testing.assert_equivariant(g, V(G), V(G), tol=1e-3)


def test_rot90_flow_is_exact_for_permutation_and_sw_rotation_bases(digits):
    # the measurement package's rotation flow at t = pi/2 lands on pixel centres: an exact rot90
    quarter = get_transform("rotate", padding="zeros").apply(digits, math.pi / 2)
    assert torch.allclose(quarter, torch.rot90(digits, -1, dims=(-2, -1)), atol=1e-12)
    for name in ("rot90", "rotation", "scaling"):
        assert _flow_error(_layer(name, 0), digits, math.pi / 2) < 1e-12


def test_sw_rotation_layer_is_only_quasi_equivariant_to_continuous_rotations(digits):
    t = math.pi / 8  # one step of the rotation base
    for seed in range(3):
        rot = _flow_error(_layer("rotation", seed), digits, t)
        shift = _flow_error(_layer("shift_up", seed), digits, t)
        assert 1e-3 < rot < 0.2  # not exact, but small
        assert rot < 0.5 * shift  # a shift-based layer of the same size is far from rotation equivariant
    # the shift layer is also far from rot90-equivariant, unlike the rotation layer
    assert _flow_error(_layer("shift_up", 0), digits, math.pi / 2) > 0.3
    np.testing.assert_array_less(0.0, _flow_error(_layer("rotation", 0), digits, t))
