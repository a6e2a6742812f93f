"""MLP+Aug: rho_out(g)^-1 f(rho_in(g) x) per sample while training, f(x) in evaluation."""

import pytest
import torch

from symkit.groups import SO, S
from symkit.nn import EMLP, MLP, GroupAugmented
from symkit.reps import Scalar, V


@pytest.mark.parametrize("group", [SO(3), S(4)])
def test_augmenting_an_equivariant_model_changes_nothing(group):
    """If f is equivariant, rho_out(g)^-1 f(rho_in(g) x) = f(x) for every g: the transforms are applied the right
    way round."""
    rep_in, rep_out = 2 * V(group) + Scalar, V(group) ** 2
    torch.manual_seed(0)
    model = EMLP(rep_in, rep_out, group, ch=32, num_layers=1, dtype=torch.float64)
    augmented = GroupAugmented(model, rep_in, rep_out, group, seed=1)
    x = torch.randn(16, rep_in.size, dtype=torch.float64)
    augmented.train()
    torch.testing.assert_close(augmented(x), model(x), rtol=1e-9, atol=1e-9)


def test_a_plain_mlp_sees_transformed_inputs_in_training_only():
    G = SO(3)
    rep_in, rep_out = V(G), V(G)
    torch.manual_seed(0)
    mlp = MLP(3, 3, ch=16, num_layers=1, dtype=torch.float64)
    augmented = GroupAugmented(mlp, rep_in, rep_out, G, seed=0)
    x = torch.randn(8, 3, dtype=torch.float64)
    augmented.train()
    r_in, r_out_inv = GroupAugmented(mlp, rep_in, rep_out, G, seed=0).transforms(8, x)
    expected = torch.einsum("nij,nj->ni", r_out_inv, mlp(torch.einsum("nij,nj->ni", r_in, x)))
    torch.testing.assert_close(augmented(x), expected)  # the same seed draws the same elements
    assert not torch.allclose(augmented(x), mlp(x))
    augmented.eval()
    torch.testing.assert_close(augmented(x), mlp(x))


def test_bad_arguments_are_refused():
    G = SO(3)
    with pytest.raises(TypeError, match="rep_in must be a symkit Rep"):
        GroupAugmented(MLP(3, 3), 3, V(G), G)
    with pytest.raises(TypeError, match="group must be a symkit Group"):
        GroupAugmented(MLP(3, 3), V(G), V(G), "SO(3)")
