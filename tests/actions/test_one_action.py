"""One action object drives the four methods: projection onto equivariant layers (seed 002), the Lie derivative
(thesis ch. 4), PowerNet bases (seed 003) and the equivariance test; and it converts to a core Group."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.actions import (
    CyclicTranslations2D,
    ImageFlow,
    Permutations,
    Rotations90,
    get_transform,
    lift,
    pixels_per_unit,
)
from symkit.actions.derivatives import generator
from symkit.dynamics import LayerSpec, dim_E, project
from symkit.measure import lee_table, lie_derivative
from symkit.nn.powernet import PowerLayer, bases_for, grid_shift
from symkit.reps import V
from symkit.testing import assert_equivariant


def _commutant_dim(action) -> int:
    """Burnside: dim of the maps commuting with a permutation action = (1/|G|) sum_g fix(g)^2."""
    return sum(int((action.perm(g) == np.arange(action.size)).sum()) ** 2 for g in action.elements()) // action.order


@pytest.mark.parametrize("action", [Rotations90(7), CyclicTranslations2D(5)], ids=repr)
def test_projection_and_core_group_agree_on_the_commutant(action):
    # the core solver on V(action.to_group()) and the dynamics dimension count give Burnside's number
    G = action.to_group()
    expected = _commutant_dim(action)
    assert (V(G) >> V(G)).rank() == expected
    assert dim_E(LayerSpec(action, action, 1, 1)) == expected
    # the projection lands on layers fixed by every generator, and is idempotent (float64, exact up to rounding)
    A = torch.randn(2, 3, *action.shape, *action.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    spec = LayerSpec(action, action, 3, 2)
    P = project(A, spec)
    for g in action.generators():
        torch.testing.assert_close(lift(P, g, action, action), P, rtol=0, atol=1e-12)
    torch.testing.assert_close(project(P, spec), P, rtol=0, atol=1e-12)
    torch.testing.assert_close(project(A, spec, method="basis"), P, rtol=0, atol=1e-10)


def test_the_lie_derivative_takes_the_action_and_uses_its_flows():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Tanh(), torch.nn.Flatten(),
                                torch.nn.Linear(2 * 49, 3)).double()
    x = torch.randn(4, 1, 7, 7, dtype=torch.float64)
    rot = Rotations90(7)
    assert [f.name for f in rot.flows()] == ["rotate"]
    torch.testing.assert_close(lie_derivative(model, x, rot), lie_derivative(model, x, "rotate"), rtol=0, atol=0)
    shifts = CyclicTranslations2D(7)
    assert set(lee_table(model, x, shifts)) == {"translate_x", "translate_y"}
    with pytest.raises(ValueError, match="has 2 flows"):
        lie_derivative(model, x, shifts)
    with pytest.raises(ValueError, match="has 0 flows"):
        lie_derivative(model, x, Permutations(7, on="vector"))


@pytest.mark.parametrize("action", [Rotations90(6), CyclicTranslations2D(6)], ids=repr)
def test_powernet_bases_of_an_action_give_an_exactly_equivariant_layer(action):
    bases = bases_for(action)
    assert len(bases) == len(action.generators())
    for base, g in zip(bases, action.generators()):
        np.testing.assert_array_equal(base.to_dense().numpy(), action.matrix(g))
    layer = PowerLayer(bases, 2, 3, kernel_size=3, generator=torch.Generator().manual_seed(0)).double()

    def f(x):
        return layer(x.flatten(2)).unflatten(2, action.shape)

    x = torch.randn(4, 2, *action.shape, dtype=torch.float64)
    err = assert_equivariant(f, action, action, inputs=x)
    assert err < 1e-14


def test_the_equivariance_test_catches_a_model_that_is_not_equivariant():
    action = Rotations90(6)
    conv = torch.nn.Conv2d(1, 1, 3, padding=1).double()  # a generic 3x3 filter is not rotation-equivariant
    x = torch.randn(2, 1, 6, 6, dtype=torch.float64)
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(conv, action, action, inputs=x)
    with torch.no_grad():  # a filter with the symmetry of the square is
        conv.weight.copy_(torch.tensor([[1.0, 2.0, 1.0], [2.0, 5.0, 2.0], [1.0, 2.0, 1.0]]))
    assert assert_equivariant(conv, action, action, inputs=x) < 1e-15
    pooled = torch.nn.Sequential(conv, torch.nn.Flatten(), torch.nn.Identity())
    with pytest.raises(TypeError, match="declares no symmetry"):
        assert_equivariant(pooled)


def test_a_flow_gives_its_sampled_generator_and_a_powernet_base():
    n = 7  # odd: the Shannon-Whittaker derivative is exact, so one unit of pixels is an exact cyclic shift
    flow = get_transform("translate_x")
    s = pixels_per_unit(n)
    (base,) = bases_for(flow, (n, n), step=1 / s)  # one pixel along the columns
    np.testing.assert_allclose(base.to_dense().numpy(), grid_shift((n, n), 1, 1).to_dense().numpy(), atol=1e-10)
    # the rotate flow samples at the rotated coordinates: its generator is minus PowerNet's content rotation
    np.testing.assert_allclose(get_transform("rotate").grid_generator(n), -generator(n, "rotation"), atol=1e-12)
    assert np.allclose(ImageFlow(brightness=1.0, name="b").grid_generator(3), np.eye(9))
    with pytest.raises(ValueError, match="needs the grid shape"):
        bases_for(flow)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 6), kind=st.sampled_from(["rot", "shift"]))
def test_core_group_of_a_grid_action_has_burnside_rank(n, kind):
    action = Rotations90(n) if kind == "rot" else CyclicTranslations2D(n)
    G = action.to_group()
    assert (V(G) >> V(G)).rank() == _commutant_dim(action)
    # the group generated by the permutation matrices has the action's order
    assert math.isclose(len(G.elements(10_000)), action.order)
